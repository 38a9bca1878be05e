"""The counter-hash random numbers under the samplers (jaxpriv.kernels.samplers.random_bits & co.)."""

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxpriv.kernels import samplers
from tests.conftest import sample


def test_words_depend_on_the_key_and_the_flat_index_only():
    key = jax.random.key(7)
    flat = np.asarray(samplers.random_bits(key, (24,)))
    np.testing.assert_array_equal(np.asarray(samplers.random_bits(key, (2, 3, 4))).ravel(), flat)
    assert len(set(flat.tolist())) == 24  # a bijection of the index: no repeats in one draw
    other = np.asarray(samplers.random_bits(jax.random.fold_in(key, 1), (24,)))
    assert (other != flat).mean() > 0.9


def test_words_are_balanced_bit_by_bit():
    words = np.asarray(samplers.random_bits(jax.random.key(0), (1 << 18,)))
    bits = (words[:, None] >> np.arange(32, dtype=np.uint32)) & 1
    share = bits.mean(axis=0)
    # 2^18 fair bits: standard deviation 0.001 per position; 6 sigma
    assert np.all(np.abs(share - 0.5) < 0.006), share
    # consecutive indices are not correlated (the weakness of a plain counter)
    signs = 2.0 * bits[:, 0] - 1.0
    assert abs(np.mean(signs[1:] * signs[:-1])) < 0.012


def test_entry_words_are_one_round_over_the_rows_key():
    """entry_bits: entry w of row r is mix(k_r ⊕ c_w), k_r the row's random_bits word and c_w =
    mix(w·φ + offset), written out here; a row's words are distinct and depend on its index
    only (a prefix of rows draws the same words); bits balanced; the same key's other rows and
    another key's rows share no row's words."""
    key = jax.random.key(11)
    words = np.asarray(samplers.entry_bits(key, (300, 4, 9)))
    rows = np.asarray(samplers.random_bits(key, (300, 4)))

    def mix(x):
        x = np.asarray(x, np.uint64) & 0xFFFFFFFF
        x ^= x >> 16
        x = (x * 0x7FEB352D) & 0xFFFFFFFF
        x ^= x >> 15
        x = (x * 0x846CA68B) & 0xFFFFFFFF
        return x ^ (x >> 16)

    constants = mix(np.arange(9, dtype=np.uint64) * samplers.ENTRY_WEYL + samplers.ENTRY_OFFSET)
    np.testing.assert_array_equal(words, mix(rows[..., None] ^ constants).astype(np.uint32))
    np.testing.assert_array_equal(np.asarray(samplers.entry_bits(key, (7, 4, 9))), words[:7])
    assert all(len(set(row.tolist())) == 9 for row in words.reshape(-1, 9))
    other = np.asarray(samplers.entry_bits(jax.random.fold_in(key, 1), (300, 4, 9)))
    assert len(set(map(bytes, words.reshape(-1, 9))) & set(map(bytes, other.reshape(-1, 9)))) == 0
    big = np.asarray(samplers.entry_bits(jax.random.key(0), (1 << 15, 8))).ravel()
    share = ((big[:, None] >> np.arange(32, dtype=np.uint32)) & 1).mean(axis=0)
    assert np.all(np.abs(share - 0.5) < 0.006), share  # 2^18 fair bits: 6 sigma
    # neighbouring entries of a row are not correlated
    signs = 2.0 * (big & 1).astype(np.float64) - 1.0
    assert abs(np.mean(signs[1:] * signs[:-1])) < 0.012


def test_unit_interval_is_open_at_both_ends():
    extremes = jnp.array([0, 1 << 9, 0xFFFFFFFF], jnp.uint32)
    u = np.asarray(samplers.unit_interval(extremes), np.float64)
    assert u[0] == 2.0**-24 and u[1] == 2.0**-24 + 2.0**-23 and u[2] == 1.0 - 2.0**-24
    z = samplers._triangular_of(extremes)  # both halves 0 / both 65535: the support's ends
    assert z[0] == -z[2] == np.float32(-65535) * samplers.TRIANGULAR_SCALE
    assert abs(float(z[2]) - math.sqrt(6.0)) < 1e-4


def test_uniform_histogram_and_range():
    u = np.asarray(samplers.uniform(jax.random.key(2), (1 << 20,), -1.0, 3.0), np.float64)
    assert u.min() > -1.0 and u.max() < 3.0
    counts, _ = np.histogram(u, bins=32, range=(-1.0, 3.0))
    expected = u.size / 32
    chi2 = np.sum((counts - expected) ** 2 / expected)
    assert chi2 < 80  # 31 degrees of freedom: P(chi2 > 80) < 1e-5


def test_triangular_variates_have_the_triangular_law():
    """Mean 0, variance 1 and the CDF of the sum of two uniforms, ``(x + √6)²/12`` below 0."""
    z = np.sort(np.asarray(samplers.triangular(jax.random.key(3), (1 << 20,)), np.float64))
    assert z.dtype == np.float64 and abs(z.mean()) < 0.006 and abs(z.var() - 1.0) < 0.01
    assert z[0] > -math.sqrt(6.0) and z[-1] < math.sqrt(6.0)
    root6 = math.sqrt(6.0)
    for x in (-2.2, -1.0, -0.3, 0.0, 0.7, 1.5, 2.3):
        cdf = (x + root6) ** 2 / 12 if x < 0 else 1 - (root6 - x) ** 2 / 12
        assert abs(np.searchsorted(z, x) / z.size - cdf) < 0.003, x
    # exact on a word: (hi + lo − 65535)·√6/2¹⁶ in float32
    word = jnp.array([(40000 << 16) | 123], jnp.uint32)
    expected = np.float32(40000 + 123 - 65535) * samplers.TRIANGULAR_SCALE
    assert samplers._triangular_of(word)[0] == expected


def test_float64_mode_draws_float64():
    with jax.enable_x64(True):
        u = samplers.uniform(jax.random.key(4), (8,))
        assert u.dtype == jnp.float64
        mech = sample(jax.random.key(5), 16, samplers.SamplerSpec(3, 4))
        assert mech.log_K.dtype == jnp.float64
        np.testing.assert_allclose(np.exp(np.asarray(mech.log_K)).sum(-1), 1.0, rtol=1e-6)


def test_a_draw_too_large_for_the_counter_is_refused_before_allocating():
    with pytest.raises(ValueError, match="2\\*\\*32"):
        samplers.random_bits(jax.random.key(0), (1 << 16, 1 << 16))


@pytest.mark.parametrize("spec", [
    samplers.SamplerSpec(8, 8, prior="uniform"),
    samplers.SamplerSpec(8, 8, prior="dirichlet", belief_eps_max=1.0),
    samplers.SamplerSpec(4, 3, prior="uniform", values=True),
    samplers.SamplerSpec(4, 4, prior="close", prior_zero_fraction=0.3)],
    ids=["uniform", "dirichlet-belief", "values", "close-zeros"])
def test_all_seeds_hold_each_specs_own_seed_words(spec):
    """The sweep draws every block's seed words with one program for every relation
    (``draw_all_seeds``) and picks a spec's (``seeds_for``, as ``draw_seeds`` does): bit for bit
    the words of the stream's definition — ``log_K``'s 8 draws from ``split(key, 4)[0]``, the
    prior's from ``[1]`` and ``[2]``, the values' 2 from ``[3]`` — with ``None`` exactly where
    the spec draws no prior or no values."""
    def words(keys):
        return jnp.stack([jax.random.bits(k, (2,), jnp.uint32) for k in keys])

    for i in (0, 1, 12345):
        key = jax.random.fold_in(jax.random.key(7), i)
        k_K, k_prior, k_belief, k_values = jax.random.split(key, 4)
        random_prior = (spec.prior != "uniform" or spec.prior_zero_fraction > 0
                        or spec.belief_eps_max > 0)
        own = samplers.NativeSeeds(
            words(jax.random.split(k_K, 8)),
            samplers.prior_seeds(k_prior, k_belief) if random_prior else None,
            words(jax.random.split(k_values)) if spec.values else None)
        picked = samplers.seeds_for(samplers.draw_all_seeds(key), spec)
        drawn = samplers.draw_seeds(key, spec, "native")
        for a, b in zip(picked, drawn):
            assert (a is None) == (b is None)
            if a is not None:
                np.testing.assert_array_equal(a, b)
        assert (own.prior is None) == (spec.prior == "uniform" and spec.prior_zero_fraction == 0
                                       and spec.belief_eps_max == 0)
        assert (own.values is None) == (not spec.values)
        for a, b in zip(own, picked):
            assert (a is None) == (b is None)
            if a is not None:
                np.testing.assert_array_equal(a, b)


def _rare_draws(count=4096, fraction=0.25, seed=3, kernel="xla"):
    spec = samplers.SamplerSpec(4, 4, rare_fraction=fraction)
    key = jax.random.key(seed)
    made = np.asarray(samplers.sample(key, count, spec, kernel).log_K, np.float64)
    drawn = np.asarray(samplers.sample(key, count, samplers.SamplerSpec(4, 4), kernel).log_K,
                       np.float64)
    return made, drawn


def test_a_share_of_the_mechanisms_gets_a_rare_output():
    """``with_rare_output``: about ``fraction`` of the mechanisms change, the others are exactly
    as drawn; in a changed one every row is normalized, one output's log-mass is lowered in all
    rows but one (by at most RARE_NATS, never below RARE_FLOOR unless drawn there) and the other
    entries of a row move together (the renormalization only)."""
    made, drawn = _rare_draws()
    count = len(made)
    same = np.all((made == drawn) | (np.isneginf(made) & np.isneginf(drawn)), axis=(1, 2))
    share = 1.0 - same.mean()
    sigma = math.sqrt(0.25 * 0.75 / count)
    assert abs(share - 0.25) < 5 * sigma
    with np.errstate(invalid="ignore"):
        shift = np.where(np.isfinite(drawn), made - drawn, np.nan)
    for i in np.flatnonzero(~same)[:300]:
        np.testing.assert_allclose(np.exp(made[i]).sum(-1), 1.0, rtol=1e-5)
        # per row: the renormalization's common shift (the largest: lowering only lowers), and
        # the rare output's own drop
        common = np.nanmax(shift[i], axis=-1, keepdims=True)
        drop = np.nan_to_num(common - shift[i], nan=0.0)
        lowered = drop > 1e-3
        outputs = np.flatnonzero(lowered.any(axis=0))
        assert len(outputs) <= 1
        if len(outputs):
            assert lowered[:, outputs[0]].sum() <= 3  # one row keeps its mass there
            assert np.all(drop <= samplers.RARE_NATS + 1e-3)
            rare = made[i][:, outputs[0]][lowered[:, outputs[0]]]
            assert np.all(rare >= samplers.RARE_FLOOR - 1e-3)
    deep = made[~same].min(axis=(1, 2))
    assert np.sum(deep < -300) > 0.2 * np.sum(~same)  # the rare outputs do go deep


def test_rare_outputs_are_the_same_for_the_native_and_the_xla_sampler():
    from jaxpriv.kernels.samplers import native_sampler_applies
    if not native_sampler_applies():
        pytest.skip("no native sampler on this platform")
    xla, _ = _rare_draws(kernel="xla")
    native, _ = _rare_draws(kernel="native")
    assert np.array_equal(np.isfinite(xla), np.isfinite(native))
    finite = np.isfinite(xla)
    np.testing.assert_allclose(native[finite], xla[finite], atol=1e-3)


def test_a_sweep_draws_rare_outputs_where_its_conclusion_is_extreme_there():
    """ε(δ)'s and δ(ε)'s extremes sit at rare outputs (``Notion.rare_outputs``): their claims'
    sweeps draw a quarter of their mechanisms with one (D8: Bun–Steinke's zCDP → (ε, δ) is within
    1% only at ρ ≳ 250, where random draws rarely go); other claims' sweeps draw as before."""
    from jaxpriv import registry
    from jaxpriv.engines import sweep, sweep_step
    for rid, share in (("D8.d1e-2", samplers.RARE_SHARE), ("D9.e1", samplers.RARE_SHARE),
                       ("R1", 0.0), ("D5.a2", 0.0)):
        config = sweep.make_config(rid, 4, 4, 1000, 0)
        assert sweep_step.sampler_spec(config, registry.get(rid)).rare_fraction == share
