"""A deliberately false claim, to see how jaxpriv reports one: "ε-LDP ⇒ TV ≤ tanh(ε/4)".

Binary randomized response has TV tanh(ε/2) > tanh(ε/4) at every ε > 0, so the audit finds
verified violations and saves witnesses that `jaxpriv show --plugin THIS_FILE WITNESS` re-checks
(exit status 1: violated). The notion is the one of tv_rows.py under another key, so both
plugins can be loaded together.
"""

import jax.numpy as jnp

from jaxpriv import Notion, Relation, Source, register


def tv_rows(mech, **params):
    K = jnp.exp(mech.log_K)
    d = jnp.abs(K[..., :, None, :] - K[..., None, :, :]).sum(-1)
    return 0.5 * d.max(axis=(-2, -1))


register(Notion("tv_rows_false", tv_rows, doc="largest TV distance between two rows",
                unit="probability", post_processing=True))
register(Relation(id="TVFALSE", statement="ε-LDP ⇒ max TV between rows ≤ tanh(ε/4) (false)",
                  premise="ldp", conclusion="tv_rows_false",
                  bound=lambda x, *params: jnp.tanh(x / 4),
                  sources=(Source("a deliberately false claim"),)))
