"""A jaxpriv plugin: a notion jaxpriv does not ship, and a claim about it.

The largest total-variation distance between two rows of the mechanism, and the claim that
ε-LDP caps it at tanh(ε/2) = (e^ε − 1)/(e^ε + 1) (Kairouz, Oh, Viswanath 2015: every ε-LDP pair
of rows is a post-processing of binary randomized response, whose rows are that far apart).

    jaxpriv audit --plugin examples/plugins/tv_rows.py --relations TV1 --out runs/tv1

The claim is attained by binary randomized response, so the audit reads "tight".
"""

import jax.numpy as jnp

from jaxpriv import Notion, Relation, Source, register


def tv_rows(mech, **params):
    """One level per mechanism of the batch: ½ max_{d,d'} Σ_w |K[d,w] − K[d',w]|."""
    K = jnp.exp(mech.log_K)
    d = jnp.abs(K[..., :, None, :] - K[..., None, :, :]).sum(-1)
    return 0.5 * d.max(axis=(-2, -1))


register(Notion("tv_rows", tv_rows, doc="largest TV distance between two rows",
                source=Source("folklore"), unit="probability", post_processing=True,
                maximum=1.0))  # a TV distance is at most 1: a bound ≥ 0.99 says nothing
register(Relation(id="TV1", statement="ε-LDP ⇒ max TV between rows ≤ tanh(ε/2)",
                  premise="ldp", conclusion="tv_rows",
                  bound=lambda x, *params: jnp.tanh(x / 2),
                  sources=(Source("Kairouz, Oh, Viswanath 2015", "Thm 2.1"),)))
