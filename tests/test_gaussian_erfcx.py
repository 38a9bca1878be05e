"""``jaxpriv.core.gaussian.erfcx`` against SciPy: JAX's own returns 0 at scattered points
(float32 in [9.19, 26.6], float64 near 26.54, jax 0.10.2), which made the GDP bound δ_μ(ε)
NaN — the sweeps' NaN count found it on D10 (12–25 of 20,000 mechanisms)."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import scipy.special as sp

from jaxpriv.core.gaussian import erfcx, gaussian_delta

X = np.linspace(-3.0, 60.0, 200_001)


@pytest.mark.parametrize("dtype, rtol", [(jnp.float32, 2e-6), (jnp.float64, 1e-13)])
def test_erfcx_matches_scipy_everywhere(dtype, rtol):
    with jax.enable_x64(dtype == jnp.float64):
        got = np.asarray(erfcx(jnp.asarray(X, dtype)), np.float64)
    want = sp.erfcx(X.astype(np.float32).astype(np.float64) if dtype == jnp.float32 else X)
    np.testing.assert_allclose(got, want, rtol=rtol)


def test_the_gdp_bound_is_never_nan_at_small_mu():
    """μ = 0.0765 at ε = 1 (a D10 mechanism of the quick sweep): NaN in float32 before."""
    mus = np.geomspace(1e-3, 50.0, 4001)
    narrow = np.asarray(gaussian_delta(jnp.asarray(mus, jnp.float32), 1.0))
    with jax.enable_x64(True):
        wide = np.asarray(gaussian_delta(jnp.asarray(mus), 1.0))
        a = -1.0 / mus + mus / 2
        over = np.asarray(gaussian_delta(jnp.asarray(np.geomspace(0.02, 0.05, 2001)), 1.0))
    assert not np.isnan(narrow).any() and not np.isnan(wide).any() and not np.isnan(over).any()
    # float32 follows float64 where float64's value is a normal float32
    normal = wide > 1e-30
    np.testing.assert_allclose(narrow[normal], wide[normal], rtol=1e-4)
    assert a.min() < -37.5  # the float64 bug's region (−b/√2 ≈ 26.5) is inside the scan
