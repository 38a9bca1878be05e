"""The native CPU kernel (jaxpriv.kernels.native) against the float64 reference notions and the XLA
kernel, on the sweep's own mechanisms, odd shapes (partial blocks of 16, n·m not a multiple of
16) and edge cases; plus its build: cached, fails with a reason, can be turned off."""

import os
import stat
import warnings

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxpriv.kernels import fused, native, samplers
from jaxpriv.kernels.native import builder
from tests.conftest import sample
from tests.test_fused import assert_levels_close, random_batch, reference_levels

FIELDS = fused.RecordLevels._fields


def test_the_kernel_builds_wherever_a_compiler_exists():
    """CI has a compiler: a broken build must fail here, not silently fall back to XLA. (On a
    CPU without AVX2 it builds but is not used: no faster than XLA there.)"""
    if builder._compiler() is None:
        pytest.skip("no C++ compiler on this machine")
    assert native.build().exists()
    assert native.available() or "AVX2" in native.unavailable_reason()


def test_a_build_started_ahead_leaves_errors_to_the_first_use(tmp_path, monkeypatch):
    """builder.build_ahead (an audit's, before it plans) never raises: a -march this CPU cannot
    run, a name that is no -march, the kernel turned off or a library built already give no
    thread; the first use of the kernel reports what is wrong, as without it. A build's scratch
    folder left by an exit mid-build is removed by the next build."""
    import time as clock

    monkeypatch.setenv("JAXPRIV_CACHE", str(tmp_path))
    for bad in ("x86-64-v9;rm", "not a march"):
        monkeypatch.setenv("JAXPRIV_NATIVE_MARCH", bad)
        assert builder.build_ahead() is None
    monkeypatch.setattr(builder, "MARCH_NEEDS", {"needs-nothing-here": ("no-such-cpu-flag",)})
    monkeypatch.setenv("JAXPRIV_NATIVE_MARCH", "needs-nothing-here")
    if os.uname().machine == "x86_64":
        assert builder.build_ahead() is None
    monkeypatch.delenv("JAXPRIV_NATIVE_MARCH")
    monkeypatch.setenv("JAXPRIV_NATIVE", "off")
    assert builder.build_ahead() is None
    monkeypatch.delenv("JAXPRIV_NATIVE")
    target = builder.library_path(builder.march())
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_bytes(b"")  # "built": nothing to do
    assert builder.build_ahead() is None
    stale, fresh = target.parent / "tmpstale", target.parent / "tmpfresh"
    stale.mkdir(), fresh.mkdir()
    old = clock.time() - builder.SCRATCH_AGE_S - 10
    os.utime(stale, (old, old))
    builder._stale_scratch(target.parent)
    assert not stale.exists() and fresh.exists()



def batch32(seed, count, n, m, zero_fraction=0.0):
    with jax.enable_x64(True):
        return random_batch(seed, count, n, m, zero_fraction).astype(jnp.float32)


def native_levels(log_K, log_prior, log_belief):
    return dict(zip(FIELDS, jax.jit(native.record_levels)(log_K, log_prior, log_belief)))


@pytest.mark.parametrize("shape", [(1, 1), (2, 2), (3, 7), (8, 8), (5, 16), (16, 16), (3, 33)])
def test_native_matches_float64_reference_on_odd_shapes(native_built, shape):
    """1,000 + 7 mechanisms: a partial last block; n·m = 80 and 256 use the 16×16 transposes,
    21 and 99 the scalar path for what is left over."""
    with jax.enable_x64(True):
        mech = random_batch(7, 1007, *shape, zero_fraction=0.2)
        want = {k: np.asarray(v) for k, v in reference_levels(mech).items()}
    mech32 = mech.astype(jnp.float32)
    got = native_levels(mech32.log_K, mech32.log_prior, mech32.log_belief)
    assert_levels_close(got, want, rtol=1e-3, atol=2e-6)


def test_native_matches_xla_kernel_on_sampler_output_including_extremes(native_built):
    """The sweep's own mechanisms (Dirichlet rows to concentration 1e-2, sharp logits, k-RR to
    ε = 8, sparse rows, ε-close priors, tilted beliefs) agree with the XLA kernel to float32
    rounding, and with the float64 reference."""
    mech = sample(jax.random.key(3), 8192, samplers.SamplerSpec(8, 8,
                                                                        belief_eps_max=1.0))
    args = (mech.log_K, mech.log_prior, mech.log_belief)
    got = native_levels(*args)
    xla = jax.jit(lambda *a: fused.record_levels(*a, kernel="xla"))(*args)._asdict()
    assert_levels_close(got, xla, rtol=2e-5, atol=2e-7)
    with jax.enable_x64(True):
        want = {k: np.asarray(v) for k, v in reference_levels(mech.astype(jnp.float64)).items()}
    assert_levels_close(got, want, rtol=1e-3, atol=2e-6)
    assert np.isinf(want["ldp"]).any() and (want["abp"] > 0.5).any()  # the extremes are there


def test_native_keeps_relative_accuracy_where_abp_is_tiny(native_built):
    """K ≈ constant: ABP ≈ 1e-4 comes from a JS of 1e-8; sqrt amplifies any cancellation."""
    rng = np.random.default_rng(0)
    with jax.enable_x64(True):
        base = np.full((64, 8, 8), 1 / 8)
        K = base * (1 + 1e-3 * rng.standard_normal((64, 8, 8)))
        K /= K.sum(-1, keepdims=True)
        mech = random_batch(0, 64, 8, 8)
        from jaxpriv.core.mechanisms import Mechanism
        mech = Mechanism.from_K(K, np.exp(np.asarray(mech.log_prior)), np.exp(
            np.asarray(mech.log_prior)), dtype=jnp.float64)
        want = np.asarray(reference_levels(mech)["abp"])
    mech32 = mech.astype(jnp.float32)
    got = np.asarray(native_levels(mech32.log_K, mech32.log_prior, mech32.log_belief)["abp"])
    assert want.max() < 1e-3
    np.testing.assert_allclose(got, want, rtol=2e-3)  # float32 input rounding of K ≈ 1e-7


def test_native_edge_cases(native_built):
    """Zero entries, an impossible output, a ruled-out secret with an output only it produces,
    a constant mechanism, the identity (disjoint rows: JS = ln 2 terms), zeros in the belief."""
    from jaxpriv.core.mechanisms import Mechanism
    K = np.array([
        [[0.5, 0.5, 0.0], [0.25, 0.75, 0.0], [0.0, 0.0, 1.0]],
        [[1 / 3, 1 / 3, 1 / 3]] * 3,
        [[1.0, 0.0, 0.0], [0.0, 1.0, 0.0], [0.0, 0.0, 1.0]],
        [[0.9, 0.1, 0.0], [0.1, 0.9, 0.0], [0.5, 0.5, 0.0]],
    ])
    prior = np.array([[0.5, 0.5, 0.0], [0.2, 0.3, 0.5], [0.6, 0.4, 0.0], [1 / 3] * 3])
    belief = np.array([[0.5, 0.5, 0.0], [0.2, 0.3, 0.5], [0.5, 0.5, 0.0], [0.2, 0.2, 0.6]])
    with jax.enable_x64(True):
        mech = Mechanism.from_K(K, prior, belief, dtype=jnp.float64)
        want = {k: np.asarray(v) for k, v in reference_levels(mech).items()}
    mech32 = mech.astype(jnp.float32)
    got = native_levels(mech32.log_K, mech32.log_prior, mech32.log_belief)
    assert_levels_close(got, want, rtol=1e-5, atol=1e-7)
    assert np.isinf(got["ldp"][0]) and np.isinf(got["eps_unif"][0]) and got["ldp"][1] == 0


def test_native_batch_shapes_vmap_and_empty_batch(native_built):
    mech = batch32(5, 24, 3, 4)
    args = (mech.log_K, mech.log_prior, mech.log_belief)
    flat = native_levels(*args)
    stacked = [a.reshape((2, 12) + a.shape[1:]) for a in args]
    nested = dict(zip(FIELDS, jax.vmap(native.record_levels)(*stacked)))
    one = native.record_levels(*(a[13] for a in args))
    for name in FIELDS:
        assert nested[name].shape == (2, 12) and one[FIELDS.index(name)].shape == ()
        np.testing.assert_array_equal(np.asarray(nested[name]).reshape(-1), flat[name])
        assert float(one[FIELDS.index(name)]) == float(flat[name][13])
    empty = native.record_levels(*(a[:0] for a in args))
    assert all(level.shape == (0,) for level in empty)


def test_fused_dispatch_native_for_float32_on_cpu_and_xla_for_float64(native_built):
    mech = batch32(2, 40, 4, 4)
    args = (mech.log_K, mech.log_prior, mech.log_belief)
    assert fused.uses_native_kernel(*args)
    assert "ffi" in str(jax.make_jaxpr(fused.record_levels)(*args)).lower() or \
        "custom_call" in str(jax.jit(fused.record_levels).lower(*args).as_text())
    with jax.enable_x64(True):
        args64 = tuple(a.astype(jnp.float64) for a in args)
        assert not fused.uses_native_kernel(*args64)
        with pytest.raises(TypeError, match="float32"):
            native.record_levels(*args64)
    with pytest.raises(ValueError, match="kernel must be one of"):
        fused.record_levels(*args, kernel="fortran")


def test_turned_off_by_environment_without_a_warning(monkeypatch):
    monkeypatch.setenv("JAXPRIV_NATIVE", "0")
    native._registered.cache_clear()
    try:
        assert native.state() == "not used"  # asking for the state builds nothing
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            assert not native.available()
        assert "JAXPRIV_NATIVE" in native.unavailable_reason()
        assert native.state() == "off: turned off by JAXPRIV_NATIVE"
        mech = batch32(2, 8, 3, 3)
        assert not fused.uses_native_kernel(mech.log_K)
        with pytest.raises(RuntimeError, match="not available"):
            native.record_levels(mech.log_K, mech.log_prior, mech.log_belief)
    finally:
        monkeypatch.delenv("JAXPRIV_NATIVE")
        native._registered.cache_clear()


def test_a_failed_build_names_the_compiler_error_and_warns_once(monkeypatch, tmp_path):
    compiler = tmp_path / "broken-c++"
    compiler.write_text("#!/bin/sh\necho 'record_levels.cc:1: error: no such header' >&2\n"
                        "exit 1\n")
    compiler.chmod(compiler.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("CXX", str(compiler))
    monkeypatch.setenv("JAXPRIV_CACHE", str(tmp_path / "cache"))
    builder._compiler_identity.cache_clear()
    native._registered.cache_clear()
    try:
        with pytest.raises(RuntimeError, match="no such header"):
            native.build()
        left = [p.name for p in (tmp_path / "cache" / "native").iterdir()]
        assert all(name.endswith(".lock") for name in left), left  # no partial library left
        with pytest.warns(native.NativeKernelWarning, match="using the XLA kernel.*no such header"):
            assert not native.available()
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            assert not native.available()  # said once per process
    finally:
        monkeypatch.delenv("CXX")
        monkeypatch.delenv("JAXPRIV_CACHE")
        builder._compiler_identity.cache_clear()
        native._registered.cache_clear()


def _small_source(tmp_path, monkeypatch):
    """A stand-in for record_levels.cc that compiles in a fraction of a second (the real one
    takes 5-16 s): the build's caching and locking do not depend on what it compiles."""
    source = tmp_path / "small.cc"
    source.write_text('extern "C" int JaxprivNativeLanes() { return 8; }\n')
    monkeypatch.setattr(builder, "SOURCES", (source,))
    return source


def test_the_library_is_cached_by_source_and_machine(native_built, monkeypatch, tmp_path):
    monkeypatch.setenv("JAXPRIV_CACHE", str(tmp_path))
    source = _small_source(tmp_path, monkeypatch)
    other = native.library_path()
    source.write_text(source.read_text() + "// another source\n")
    assert native.library_path() != other  # the key holds the source
    path = native.library_path()
    assert path.parent == tmp_path / "native" and not path.exists()
    assert native.build() == path and path.exists()
    built_at = path.stat().st_mtime_ns
    assert native.build() == path and path.stat().st_mtime_ns == built_at  # not rebuilt
    # the library and its build lock, nothing else (no partial library)
    assert [name for name in os.listdir(path.parent) if not name.endswith(".lock")] == [path.name]
    monkeypatch.setattr(builder, "_cpu_identity", lambda: "flags : another CPU")
    assert native.library_path() != path  # and the CPU's features


@pytest.mark.parametrize("march, lanes", [("x86-64-v4", 16), ("x86-64-v3", 8), ("x86-64", 4)])
def test_portable_builds_give_the_levels_of_the_native_build(native_built, monkeypatch, tmp_path,
                                                              march, lanes):
    """The AVX-512 (16 lanes: compress instructions, 16×16 transposes), AVX2 (8 lanes:
    table-driven compaction, 8×8 transposes) and SSE2 (4 lanes: scalar compaction and
    transposes) builds that other CPUs get, run here beside the build in use: same levels (the
    database kernel's too) and draws. With the suite capped at AVX2 (``.ci/run``:
    ``JAXPRIV_NATIVE_MARCH=x86-64-v3``), this is where an AVX-512 CPU still tests its path."""
    import platform
    if platform.machine() != "x86_64" or not set(native.MARCH_NEEDS.get(march, ())) <= \
            native.cpu_flags():
        pytest.skip(f"needs an x86-64 CPU with the features of -march={march}")
    if march == native.march():
        pytest.skip(f"-march={march} is the build in use (JAXPRIV_NATIVE_MARCH): every other "
                    f"test of this file checks it")
    monkeypatch.setenv("JAXPRIV_CACHE", str(tmp_path))
    target = f"jaxpriv_record_levels_test_{lanes}"
    assert native.register(native.build(march), target, f"{target}_sampler") == lanes
    seeds = jnp.arange(16, dtype=jnp.uint32).reshape(8, 2) * 7919
    for shape in ((8, 8), (3, 7)):  # the sampler too
        portable = jax.jit(lambda s: native._sample(f"{target}_sampler", s, 1003, *shape,
                                                    0.5))(seeds)
        here = jax.jit(lambda s: native.sample_log_K(s, 1003, *shape, 0.5))(seeds)
        assert np.array_equal(np.isinf(portable), np.isinf(here))
        finite = np.isfinite(here)
        np.testing.assert_allclose(portable[finite], here[finite], rtol=1e-5, atol=1e-5)
    prior_seeds = jnp.arange(20, dtype=jnp.uint32).reshape(10, 2) * 7919
    portable = jax.jit(lambda s: native._sample_prior(f"{target}_sampler_prior", s, 1003, 5,
                                                      "dirichlet", 3.0, 0.3, 1.0))(prior_seeds)
    here = jax.jit(lambda s: native.sample_prior(s, 1003, 5, "dirichlet", 3.0, 0.3, 1.0))(
        prior_seeds)
    for ours, theirs in zip(portable, here):
        assert np.array_equal(np.isinf(ours), np.isinf(theirs))
        finite = np.isfinite(theirs)
        np.testing.assert_allclose(ours[finite], theirs[finite], rtol=1e-5, atol=1e-5)
    for shape, seed in (((8, 8), 3), ((3, 7), 4)):  # compiled-in and generic shapes
        mech = sample(jax.random.key(seed), 1003, samplers.SamplerSpec(
            *shape, belief_eps_max=1.0))
        args = (mech.log_K, mech.log_prior, mech.log_belief)
        portable = dict(zip(FIELDS, jax.jit(lambda *a: native._call(target, *a))(*args)))
        assert_levels_close(portable, native_levels(*args), rtol=1e-5, atol=1e-6)  # FMA or not
    from jaxpriv.core.mechanisms import Records
    from tests.test_fused_databases import random_database_batch
    for records, m in ((Records(k=2, r=3), 8), (Records(k=3, r=2, default=1), 5)):
        mech = random_database_batch(11, 1003, records, m)
        fields = native.DATABASE_FIELDS
        portable = jax.jit(lambda K, p: native._databases(f"{target}_databases", K, p, records,
                                                          fields))(mech.log_K, mech.log_prior)
        here = jax.jit(lambda K, p: native.database_levels(K, p, records))(mech.log_K,
                                                                          mech.log_prior)
        assert_levels_close(dict(zip(fields, portable)), dict(zip(fields, here)), rtol=1e-5,
                            atol=1e-6)


def test_an_unwritable_cache_falls_back_to_the_temporary_directory(monkeypatch, tmp_path):
    """A home whose cache cannot be created (here: a file where the folder should be) must not
    cost the native kernel: the library goes to a per-user folder in the temporary directory."""
    blocker = tmp_path / "not-a-folder"
    blocker.write_text("")
    monkeypatch.delenv("JAXPRIV_CACHE", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(blocker))
    monkeypatch.setattr(builder.tempfile, "gettempdir", lambda: str(tmp_path / "tmp"))
    path = native.library_path()
    assert path.parent.parent.parent == tmp_path / "tmp"
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    assert native.library_path().is_relative_to(tmp_path / "cache" / "jaxpriv")
    monkeypatch.setenv("JAXPRIV_CACHE", str(tmp_path / "chosen"))
    assert native.library_path().is_relative_to(tmp_path / "chosen")



@pytest.mark.parametrize("shape", [(8, 8), (4, 4), (3, 5), (2, 2), (1, 3)])
def test_native_sampler_draws_what_the_jax_sampler_draws(native_built, shape):
    """Same random words, so the same mixture branch, RR level and sparsity mask for every
    mechanism (every −∞ in the same place); the values agree to float32 rounding of the two
    exp/log/erf⁻¹ implementations (measured: ≤ 5e-5 relative to max(1, |log K|))."""
    n, m = shape
    key = jax.random.key(11)
    draw = jax.jit(lambda k, kernel: samplers.sample_log_K(k, 3001, n, m, 0.5, kernel),
                   static_argnums=1)
    jax_draw, native_draw = np.asarray(draw(key, "xla")), np.asarray(draw(key, "native"))
    assert native_draw.shape == (3001, n, m) and native_draw.dtype == np.float32
    assert np.array_equal(np.isneginf(jax_draw), np.isneginf(native_draw))
    assert not np.isnan(native_draw).any() and not np.isposinf(native_draw).any()
    if n * m > 1:
        assert np.isneginf(native_draw).any()  # sparse mechanisms are in the draw
    finite = np.isfinite(jax_draw)
    scale = np.maximum(1.0, np.abs(jax_draw[finite]))
    assert np.max(np.abs(native_draw[finite] - jax_draw[finite]) / scale) < 1e-4
    rows = jax.scipy.special.logsumexp(native_draw, axis=-1)
    np.testing.assert_allclose(rows, 0.0, atol=1e-5)  # every row a distribution (JAX: 2.4e-6)


@pytest.mark.parametrize("spec", [
    samplers.SamplerSpec(8, 8, prior="dirichlet", belief_eps_max=1.0),
    samplers.SamplerSpec(8, 8, prior="close", eps_max=3.0),
    samplers.SamplerSpec(8, 6, prior="dirichlet", prior_zero_fraction=0.3),
    samplers.SamplerSpec(4, 5, prior="uniform", prior_zero_fraction=0.5, belief_eps_max=0.7),
    samplers.SamplerSpec(2, 2, prior="close", eps_max=0.1, belief_eps_max=2.0)],
    ids=["dirichlet-belief", "close", "dirichlet-zeros", "uniform-belief", "close-2x2"])
def test_native_prior_and_belief_are_what_the_jax_sampler_draws(native_built, spec):
    """The priors and beliefs of ``samplers.sample`` (Dirichlet-like, close to uniform, with
    zeros, tilted beliefs): the same words, so the same flat/Dirichlet choice and the same zeros
    (every −∞ in the same place), values to float32 rounding (measured ≤ 6.2e-6 relative)."""
    draw = jax.jit(lambda k, kernel: samplers.sample(k, 3001, spec, kernel), static_argnums=1)
    jax_draw, native_draw = draw(jax.random.key(5), "xla"), draw(jax.random.key(5), "native")
    for name in ("log_prior", "log_belief"):
        ours, theirs = np.asarray(getattr(native_draw, name)), np.asarray(getattr(jax_draw, name))
        assert ours.shape == (3001, spec.n) and ours.dtype == np.float32
        assert np.array_equal(np.isneginf(ours), np.isneginf(theirs))
        assert not np.isnan(ours).any() and not np.isposinf(ours).any()
        finite = np.isfinite(theirs)
        scale = np.maximum(1.0, np.abs(theirs[finite]))
        assert np.max(np.abs(ours[finite] - theirs[finite]) / scale) < 5e-5
        np.testing.assert_allclose(jax.scipy.special.logsumexp(ours, axis=-1), 0.0, atol=1e-5)
    if spec.prior_zero_fraction > 0 and spec.prior != "uniform":
        assert np.isneginf(np.asarray(native_draw.log_prior)).any()
    if spec.belief_eps_max == 0:
        np.testing.assert_array_equal(native_draw.log_prior, native_draw.log_belief)
    else:
        assert not np.array_equal(native_draw.log_prior, native_draw.log_belief)
    with pytest.raises(ValueError, match="kind must be"):
        native.sample_prior(jnp.zeros((10, 2), jnp.uint32), 4, 2, "beta", 1.0, 0.0, 0.0)


@pytest.mark.parametrize("n, kind", [(8, "dirichlet"), (20, "dirichlet"), (5, "close")])
def test_native_prior_draw_depends_on_the_index_only(native_built, n, kind):
    """Dirichlet-kind priors are grouped into vectors by whether they are flat (a vector of flat
    ones skips the Dirichlet draw), and rows are stored through a transpose where a vector holds
    a row (n <= the vector width; n = 20 goes entry by entry): each mechanism's prior and belief
    must not depend on its neighbours — prefixes of a 2,500-draw (three tiles) bit for bit."""
    seeds = jnp.arange(20, dtype=jnp.uint32).reshape(10, 2) * 7919 + 11
    draw = jax.jit(lambda s, count: native.sample_prior(s, count, n, kind, 3.0, 0.3, 1.0),
                   static_argnums=1)
    big = [np.asarray(a) for a in draw(seeds, 2500)]
    flat = np.all(big[0] == np.float32(-np.log(n)), axis=-1)
    assert kind != "dirichlet" or 0.4 < flat.mean() < 0.6  # about half flat
    for part, whole in zip(draw(seeds, 700), big):
        np.testing.assert_array_equal(part, whole[:700])
    for i in (0, 15, 1023, 1024, 2499):
        for part, whole in zip(draw(seeds, i + 1), big):
            np.testing.assert_array_equal(part[i], whole[i])


@pytest.mark.parametrize("shape", [(8, 8), (3, 5)])
def test_native_sampler_draw_depends_on_the_index_only(native_built, shape):
    """Mechanisms are grouped into vectors by mixture branch, so which mechanisms share a vector
    depends on the draw's size and on the tile (1,024 mechanisms); each one's values must not:
    the first 700 of a draw of 2,500 (three tiles) are those of a draw of 700, bit for bit, and
    so is a mechanism against a draw that ends with it (other neighbours in its vectors)."""
    seeds = jnp.arange(16, dtype=jnp.uint32).reshape(8, 2) * 104729 + 3
    draw = jax.jit(lambda s, count: native.sample_log_K(s, count, *shape, 0.5),
                   static_argnums=1)
    big = np.asarray(draw(seeds, 2500))
    np.testing.assert_array_equal(big[:700], draw(seeds, 700))
    for i in (0, 15, 1023, 1024, 2499):
        np.testing.assert_array_equal(big[i], draw(seeds, i + 1)[i])


def test_native_samplers_under_vmap_draw_each_seed_set_on_its_own(native_built):
    """Under vmap (the sweep draws several blocks at once) one call takes a batch of seed sets,
    (2, 3, 8, 2) words: each draw is bit for bit the draw of its own seeds alone."""
    seeds = (jnp.arange(96, dtype=jnp.uint32).reshape(2, 3, 8, 2) * 104729 + 5)
    prior_seeds = (jnp.arange(120, dtype=jnp.uint32).reshape(2, 3, 10, 2) * 7919 + 1)
    log_K = jax.jit(jax.vmap(jax.vmap(lambda s: native.sample_log_K(s, 40, 5, 3, 0.5))))(seeds)
    prior, belief = jax.jit(jax.vmap(jax.vmap(
        lambda s: native.sample_prior(s, 40, 5, "dirichlet", 3.0, 0.3, 1.0))))(prior_seeds)
    assert log_K.shape == (2, 3, 40, 5, 3) and prior.shape == belief.shape == (2, 3, 40, 5)
    for i in range(2):
        for j in range(3):
            np.testing.assert_array_equal(log_K[i, j], native.sample_log_K(seeds[i, j], 40, 5, 3,
                                                                           0.5))
            one = native.sample_prior(prior_seeds[i, j], 40, 5, "dirichlet", 3.0, 0.3, 1.0)
            np.testing.assert_array_equal(prior[i, j], one[0])
            np.testing.assert_array_equal(belief[i, j], one[1])
    assert not np.array_equal(log_K[0, 0], log_K[1, 2])


def test_native_sampler_is_chosen_where_it_applies_and_checks_its_input(native_built):
    spec = samplers.SamplerSpec(4, 4)
    auto = jax.jit(lambda k: samplers.sample(k, 64, spec, kernel="auto").log_K)(
        jax.random.key(0))
    native_draw = jax.jit(lambda k: samplers.sample(k, 64, spec, kernel="native").log_K)(
        jax.random.key(0))
    assert samplers.native_sampler_applies()
    np.testing.assert_array_equal(auto, native_draw)
    with pytest.raises(ValueError, match="kernel must be"):
        samplers.sample_log_K(jax.random.key(0), 4, 2, 2, kernel="fast")
    with pytest.raises(ValueError, match="at most 2"):
        native.sample_log_K(jnp.zeros((8, 2), jnp.uint32), 2**26, 8, 8, 0.1)
    with jax.enable_x64(True):
        assert not samplers.native_sampler_applies()  # float64 draws stay with JAX


@pytest.mark.parametrize("shape", [(8, 8), (3, 5)])
def test_levels_without_abp_are_the_same_levels(native_built, shape):
    """A sweep whose relation needs no ABP asks the kernel to skip it (its JS terms are most of
    the work): the other four levels must be bit for bit those of the full kernel, and ABP
    must come back as None, never as an unwritten buffer."""
    mech = sample(jax.random.key(8), 1003, samplers.SamplerSpec(*shape,
                                                                          belief_eps_max=1.0))
    args = (mech.log_K, mech.log_prior, mech.log_belief)
    full = jax.jit(native.record_levels)(*args)
    lean = jax.jit(lambda *a: native.record_levels(*a, abp=False))(*args)
    assert lean[2] is None
    for name, a, b in zip(FIELDS, full, lean):
        if name != "abp":
            np.testing.assert_array_equal(a, b)
    picked = jax.jit(lambda *a: fused.record_levels(*a, fields={"mbp", "eps_bel"}))(*args)
    assert picked.abp is None and picked.ldp is None
    np.testing.assert_array_equal(picked.mbp, full[1])
    with pytest.raises(ValueError, match="unknown fields"):
        fused.record_levels(*args, fields={"abp", "xi"})


def test_processes_building_at_once_build_once(monkeypatch, tmp_path):
    """Two processes that need the library at the same moment (an audit's workers): one
    compiles, the other waits for it and loads the same file."""
    import subprocess
    import sys
    if builder._compiler() is None:
        pytest.skip("no C++ compiler on this machine")
    monkeypatch.setenv("JAXPRIV_CACHE", str(tmp_path))
    log = tmp_path / "compiles.log"
    wrapper = tmp_path / "counting-c++"
    # a small source (the lock does not care what it builds), slowed to a real build's seconds
    # so that the second process arrives while the first still compiles
    wrapper.write_text(f"#!/bin/sh\n[ \"$1\" = --version ] || {{ echo run >> {log}; sleep 3; }}\n"
                       f"exec {builder._compiler()} \"$@\"\n")
    wrapper.chmod(wrapper.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("CXX", str(wrapper))
    source = _small_source(tmp_path, monkeypatch)
    code = (f"from pathlib import Path; from jaxpriv.kernels.native import builder; "
            f"builder.SOURCES = (Path({str(source)!r}),); print(builder.build())")
    runs = [subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
            for _ in range(2)]
    paths = {run.communicate(timeout=600)[0].strip() for run in runs}
    assert all(run.returncode == 0 for run in runs)
    assert len(paths) == 1 and os.path.exists(paths.pop())
    assert log.read_text().count("run") == 2  # one build: its one source compiled, then linked


def test_the_build_target_is_chosen_by_jaxpriv_native_march(monkeypatch):
    """``JAXPRIV_NATIVE_MARCH`` picks ``-march`` (default ``native``); a level whose features
    the CPU lacks, or a name that is not one, is refused with the reason (the XLA kernel runs
    instead) rather than built into a library that would stop at its first instruction."""
    monkeypatch.delenv("JAXPRIV_NATIVE_MARCH", raising=False)
    assert native.march() == "native"
    monkeypatch.setenv("JAXPRIV_NATIVE_MARCH", "x86-64")
    assert native.march() == "x86-64"
    assert native.library_path("x86-64") != native.library_path("native")
    monkeypatch.setenv("JAXPRIV_NATIVE_MARCH", "x86-64 -O0")
    with pytest.raises(RuntimeError, match="not a -march name"):
        native.march()
    import platform
    if platform.machine() == "x86_64":
        monkeypatch.setattr(builder, "_cpu_identity", lambda: "flags : fpu sse2 avx avx2 fma bmi2")
        monkeypatch.setenv("JAXPRIV_NATIVE_MARCH", "x86-64-v3")
        assert native.march() == "x86-64-v3"
        monkeypatch.setenv("JAXPRIV_NATIVE_MARCH", "x86-64-v4")
        with pytest.raises(RuntimeError, match="avx512f"):
            native.march()
