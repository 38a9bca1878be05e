"""Notions and relations as data: the registry's records, plugins (files and entry points), the
generic premise retraction, and the import graph the engines must keep."""

from __future__ import annotations

import importlib.metadata
import json
import re
import subprocess
import sys
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxpriv
from jaxpriv import InputError, Notion, Relation, audit, cli, registry
from jaxpriv.core import families, retractions
from jaxpriv.engines import search, sweep
from jaxpriv.core.mechanisms import Mechanism

ROOT = Path(__file__).resolve().parents[1]
PLUGINS = ROOT / "examples" / "plugins"
TV = PLUGINS / "tv_rows.py"
FALSE = PLUGINS / "tv_false.py"


def tv_rows(mech, **params):
    K = jnp.exp(mech.log_K)
    return 0.5 * jnp.abs(K[..., :, None, :] - K[..., None, :, :]).sum(-1).max(axis=(-2, -1))


@pytest.fixture
def scratch():
    """Register test records and remove them afterwards (the registry is process-wide)."""
    added = []

    def add(record):
        registry.register(record, replace=True)
        added.append(record.id if hasattr(record, "id") else record.key)
        return record

    yield add
    for name in reversed(added):
        registry.unregister(name)


# -- records -----------------------------------------------------------------------------------


@pytest.fixture
def loaded_tv():
    """The TV plugin loaded into this process, and unloaded afterwards."""
    yield TV
    registry.unregister("TV1")
    registry.unregister("tv_rows")
    if str(TV.resolve()) in registry.LOADED_PLUGINS:
        registry.LOADED_PLUGINS.remove(str(TV.resolve()))


def test_every_level_eval_prints_is_a_registered_notion(tmp_path, capsys, loaded_tv):
    """Everything ``eval`` prints as a level is a registered notion (MI included), and a
    plugin's notion is printed too."""
    path = tmp_path / "k.json"
    path.write_text(json.dumps({"K": [[0.7, 0.3], [0.2, 0.8]]}))
    assert cli.main(["eval", str(path), "--json", "--plugin", str(loaded_tv)]) == 0
    printed = json.loads(capsys.readouterr().out)
    shown = {k for k, n in registry.NOTIONS.items() if n.show and not n.needs_records
             and all(v is not registry.REQUIRED for v in n.params.values())}
    assert shown <= set(printed)
    assert {"mi", "tv_rows"} <= set(printed)
    assert printed["tv_rows"] == pytest.approx(0.5)  # ½(|0.7−0.2| + |0.3−0.8|)
    details = {"abp_mean", "abp_record", "abp_output", "abp_output_vector"}
    assert set(printed) - {"n", "m"} - details <= set(registry.NOTIONS)


def test_level_is_the_float64_reference_and_checks_its_parameters():
    rr = families.randomized_response(1.0)
    assert float(jaxpriv.level("ldp", rr)) == pytest.approx(1.0, rel=1e-14)
    with jax.enable_x64(True):
        rr64 = rr.astype(np.float64)
        mi = float(jaxpriv.core.notions.mutual_information(rr64))
        abp = float(jaxpriv.core.notions.abp(rr64, "output").level)
    assert float(jaxpriv.level("mi", rr)) == pytest.approx(mi, rel=1e-14)
    assert float(jaxpriv.level("abp", rr, law="output")) == pytest.approx(abp, rel=1e-14)
    with pytest.raises(InputError, match="takes law, q; not alpha"):
        jaxpriv.level("abp", rr, alpha=1.0)
    with pytest.raises(InputError, match="unknown notion 'nope'"):
        jaxpriv.level("nope", rr)
    with pytest.raises(InputError, match="defined on databases"):
        jaxpriv.level("bdp", rr)


@pytest.mark.parametrize("make,message", [
    (lambda: Notion("1bad", tv_rows), "notion key must be"),
    (lambda: Notion("ok", 3.0), "level must be a function"),
    (lambda: Notion("ok", tv_rows, unit="furlongs"), "unit must be one of"),
    (lambda: Notion("ok", tv_rows, params={"prior": 0.5}), "prior are reserved"),
    (lambda: Relation(id="X 1", statement="", premise="ldp", conclusion="mbp",
                      bound=lambda x, *p: x), "relation id must be"),
    (lambda: Relation(id="X1", statement="s", premise="ldp", conclusion="mbp", bound=1.0),
     "bound must be a function"),
    (lambda: Relation(id="X1", statement="s", premise="ldp", conclusion="mbp",
                      bound=lambda x, *p: x, sources=(3,)), "sources must be"),
])
def test_malformed_records_are_one_line_input_errors(make, message):
    with pytest.raises(InputError, match=message):
        make()


def test_register_checks_what_a_relation_refers_to(scratch):
    with pytest.raises(InputError, match="unknown notion 'tv_nowhere'"):
        registry.register(Relation(id="X1", statement="s", premise="ldp",
                                   conclusion="tv_nowhere", bound=lambda x, *p: x))
    with pytest.raises(InputError, match="bound\\(x, parameter\\) failed"):
        registry.register(Relation(id="X1", statement="s", premise="ldp", conclusion="mbp",
                                   bound=lambda x: x))  # takes one argument: fails when called
    with pytest.raises(InputError, match="already registered"):
        registry.register(registry.get("R1"))
    with pytest.raises(InputError, match="takes a Notion"):
        registry.register("R1")
    assert "X1" not in registry.REGISTRY


def test_hints_follow_the_condition_parameter(scratch):
    """A relation that gives no hints gets them from its condition parameter's ``held_by``: a
    pinned uniform prior only for a limit of (about) 0, else priors explored up to the limit."""
    def make(rid, **kw):
        return scratch(Relation(id=rid, statement="s", premise="ldp", conclusion="mbp",
                                parameter="eps_unif", bound=lambda x, e: x + e, **kw))
    pinned = make("H1", parameter_limit=1e-12)
    assert pinned.sampling.prior == "uniform" and pinned.search.prior == "uniform"
    limited = make("H2", parameter_limit=0.5)
    assert limited.sampling.prior == "close" and limited.search.prior == "close"
    assert limited.search.gridded_parameter
    free = scratch(Relation(id="H3", statement="s", premise="mbp", conclusion="abp",
                            parameter="eps_bel", bound=lambda x, e: x + e))
    assert free.sampling.belief_eps_max > 0 and free.search.belief == "close"
    plain = scratch(Relation(id="H4", statement="s", premise="ldp", conclusion="mbp",
                             bound=lambda x, *e: x))
    assert plain.sampling == registry.Sampling() and plain.search == registry.SearchHints()


def test_select_takes_ids_and_prefixes():
    assert registry.select("r1, R5") == ["R1", "R5"]
    assert registry.select("R1*") == ["R1", "R10", "R11", "R12", "R13", "R14", "R15"]
    assert registry.select("all") == list(registry.REGISTRY)
    with pytest.raises(InputError, match="no relation matches 'Q\\*'"):
        registry.select("Q*")


# -- the generic premise retraction ------------------------------------------------------------


def test_bisection_retraction_lands_inside_the_premise_and_is_the_identity_on_feasible(scratch):
    notion = scratch(Notion("tv_test", tv_rows, post_processing=True, unit="probability"))
    relation = scratch(Relation(id="TVID", statement="TV ≤ x ⇒ TV ≤ x", premise="tv_test",
                                conclusion="tv_test", bound=lambda x, *p: x))
    setup = search.setup_for(relation)
    rng = np.random.default_rng(0)
    with jax.enable_x64(True):
        for x in (1e-4, 0.05, 0.3, 0.9):
            for scale in (0.3, 3.0, 30.0):
                params = search.Params(*(jnp.asarray(scale * rng.standard_normal(shape))
                                         for shape in ((3, 4), (3,), (3,), (4,))))
                mech = search.build(params, jnp.float64(x), jnp.float64(0.0), relation, setup)
                level = float(notion.evaluate(mech))
                assert level <= x * (1 - 0.5 * retractions.MARGIN)
                unmixed = float(tv_rows(Mechanism(jax.nn.log_softmax(
                    max(1.0, x / 2) * params.logits, -1), mech.log_prior, mech.log_belief)))
                if unmixed > x:  # retracted: it sits at the target, not deep inside
                    assert level >= x * (1 - 2 * retractions.MARGIN)
                else:  # feasible already: left as it was
                    np.testing.assert_allclose(np.exp(mech.log_K), np.exp(jax.nn.log_softmax(
                        max(1.0, x / 2) * params.logits, -1)), rtol=1e-12)


def test_bisection_retraction_has_the_implicit_gradient(scratch):
    """d(level of the retracted mechanism)/dθ = 0 along the boundary: the retraction keeps the
    level at x, so its gradient (implicit function) must cancel the mechanism's own."""
    notion = scratch(Notion("tv_test", tv_rows, post_processing=True, unit="probability"))
    with jax.enable_x64(True):
        logits = jnp.asarray([[2.0, -1.0, 0.5], [-0.5, 1.5, 0.0]], jnp.float64)
        def retracted_level(z):
            mech = Mechanism(jax.nn.log_softmax(z, -1), jnp.log(jnp.full(2, 0.5)),
                             jnp.log(jnp.full(2, 0.5)))
            keep = retractions.bisect_keep(notion.level, mech, 0.2)
            return notion.level(retractions.mix_constant(mech, keep))

        grad = jax.grad(retracted_level)(logits)
        assert float(retracted_level(logits)) == pytest.approx(0.2 * (1 - retractions.MARGIN),
                                                              rel=1e-9)
        np.testing.assert_allclose(np.asarray(grad), 0.0, atol=1e-9)

        def keep_of(z):
            mech = Mechanism(jax.nn.log_softmax(z, -1), jnp.log(jnp.full(2, 0.5)),
                             jnp.log(jnp.full(2, 0.5)))
            return retractions.bisect_keep(notion.level, mech, 0.2)

        step = 1e-6 * jnp.asarray([[1.0, 0.0, -1.0], [0.5, -0.5, 0.0]])
        numeric = (keep_of(logits + step) - keep_of(logits - step)) / 2
        analytic = jnp.sum(jax.grad(keep_of)(logits) * step)
        assert float(analytic) == pytest.approx(float(numeric), rel=1e-4)


def test_search_reaches_the_boundary_through_the_bisection(scratch):
    scratch(Notion("tv_test", tv_rows, post_processing=True, unit="probability"))
    scratch(Relation(id="TVID", statement="TV ≤ x ⇒ TV ≤ x", premise="tv_test",
                     conclusion="tv_test", bound=lambda x, *p: x))
    config = search.make_config("TVID", 3, 3, (0.1, 0.5), restarts=4, steps=100)
    rows = search.run(config, progress=False).rows
    for row in rows:
        assert row["premise"] <= row["x"]
        assert row["slack"] == pytest.approx(1.0, abs=3e-6)  # the margin, not more


def test_a_premise_the_search_cannot_hold_is_refused(scratch):
    scratch(Notion("tv_unflagged", tv_rows, unit="probability"))
    scratch(Relation(id="TVU", statement="s", premise="tv_unflagged", conclusion="ldp",
                     bound=lambda x, *p: 2 * x))
    with pytest.raises(InputError, match="not flagged post_processing=True"):
        search.make_config("TVU", 3, 3, (0.1,))


# -- plugins -----------------------------------------------------------------------------------


def _jaxpriv(*args, cwd=None):
    return subprocess.run([sys.executable, "-m", "jaxpriv.cli", *map(str, args)],
                          capture_output=True, text=True, cwd=cwd, timeout=900)


def test_plugin_claims_get_a_sweep_a_search_and_an_audit_verdict(tmp_path):
    """The README's walkthrough: TV1 (attained by binary randomized response) reads tight; the
    deliberately false TVFALSE reads violated with a witness that `show --plugin` re-checks;
    the two run in the audit's worker processes, which load the plugins too."""
    out = tmp_path / "audit"
    done = _jaxpriv("audit", "--plugin", TV, "--plugin", FALSE, "--relations", "TV*",
                    "--budget", "quick", "--out", out, "--workers", "2", "--quiet")
    assert done.returncode == 0, done.stderr
    verdicts = {v["relation"]: v for v in json.loads((out / "summary.json").read_text())
                ["relations"]}
    assert set(verdicts) == {"TV1", "TVFALSE"}
    assert verdicts["TV1"]["verdict"] == "tight"
    assert verdicts["TV1"]["worst_slack"] == pytest.approx(1.0, abs=0.01)
    assert verdicts["TV1"]["violation_count"] == 0
    false = verdicts["TVFALSE"]
    assert false["verdict"] == "violated" and false["violation_count"] > 0
    witness = out / false["violations"][0]
    shown = _jaxpriv("show", "--plugin", FALSE, witness)
    assert shown.returncode == 1, shown.stderr
    assert "VIOLATED" in shown.stdout and "tv_rows_false" in shown.stdout
    missing = _jaxpriv("show", witness)  # without the plugin the relation is unknown
    assert missing.returncode == 2
    assert missing.stderr.count("\n") == 1 and "unknown relation 'TVFALSE'" in missing.stderr
    report = (out / "report.md").read_text()
    assert "| TV1 |" in report and "| TVFALSE |" in report


@pytest.mark.parametrize("command", [
    ["check", "SHAPE", ROOT / "examples" / "krr4.json"],
    ["eval", ROOT / "examples" / "krr4.json"],  # printed "[0, 0, 0]" and exit 0
    ["sweep", "--relation", "SHAPE", "--n", "3", "--m", "3", "--count", "5000", "--quiet"],
    ["search", "--relation", "SHAPE", "--n", "3", "--m", "3", "--grid", "0.5:1:2",
     "--restarts", "2", "--steps", "100", "--quiet"],
])
def test_a_plugin_notion_of_the_wrong_shape_is_one_line_naming_it(tmp_path, command):
    """A level that is not one number per mechanism ended check, sweep and search in a
    traceback (exit 3)."""
    plugin = tmp_path / "shape.py"
    plugin.write_text(
        "import jax.numpy as jnp\n"
        "from jaxpriv import Notion, Relation, register\n"
        "register(Notion('three', lambda mech: jnp.zeros((3,))))\n"
        "register(Relation(id='SHAPE', statement='s', premise='ldp', conclusion='three',\n"
        "                  bound=lambda x, *p: x))\n")
    out = ["--out", tmp_path / "run"] if command[0] in ("sweep", "search") else []
    done = _jaxpriv(*command, *out, "--plugin", plugin)
    assert done.returncode == 2 and done.stderr.count("\n") == 1, done.stderr
    assert re.search(r"notion 'three' \(defined at .*shape\.py:3\) must return one level per "
                     r"mechanism: shape \(.*\), got \(3,\)", done.stderr), done.stderr


def test_a_nan_plugin_level_or_bound_is_one_line_never_a_value(tmp_path):
    """``eval`` printed a NaN level as ``nan`` (``--json``: the non-JSON token ``NaN``), exit 0;
    a search over a NaN bound said the bound was infinite."""
    plugin = tmp_path / "nan.py"
    plugin.write_text(
        "import jax.numpy as jnp\n"
        "from jaxpriv import Notion, Relation, register\n"
        "register(Notion('nanlevel', lambda mech: jnp.full(mech.log_K.shape[:-2], jnp.nan)))\n"
        "register(Relation(id='NANB', statement='s', premise='ldp', conclusion='tv',\n"
        "                  bound=lambda x, *p: x * jnp.nan))\n")
    done = _jaxpriv("eval", ROOT / "examples" / "krr4.json", "--json", "--plugin", plugin)
    assert done.returncode == 2 and done.stderr.count("\n") == 1, done.stderr
    assert "'nanlevel' (defined at" in done.stderr and "nan.py:3) returned NaN" in done.stderr
    levels = json.loads(done.stdout, parse_constant=lambda c: pytest.fail(f"{c} in --json"))
    assert "nanlevel" not in levels and levels["ldp"] == 1.5
    done = _jaxpriv("search", "--relation", "NANB", "--n", "3", "--m", "3", "--grid", "0.5:1:2",
                    "--out", tmp_path / "s", "--plugin", plugin)
    assert done.returncode == 2 and done.stderr.count("\n") == 1, done.stderr
    assert "NANB's bound is NaN at ldp = 1" in done.stderr and "nan.py:5" in done.stderr


def test_a_negative_bound_reads_a_slack_below_1_and_a_negative_level_is_one_line(tmp_path):
    """A bound below 0 over a conclusion 0 is violated: its slack is −inf (it read +inf, the
    sweeps' "safest" rank, beside VIOLATED, as for autodp's pure-DP RDP); a negative level,
    outside every notion's [0, ∞], is one line naming the plugin's notion."""
    plugin = tmp_path / "neg.py"
    plugin.write_text(
        "import jax.numpy as jnp\n"
        "from jaxpriv import Notion, Relation, register\n"
        "register(Relation(id='NEGB', statement='s', premise='ldp', conclusion='tv',\n"
        "                  bound=lambda x, *p: -jnp.ones_like(x)))\n"
        "register(Notion('minus_tv', lambda mech: -jnp.max(jnp.abs(\n"
        "    jnp.exp(mech.log_K)[..., :1, :] - jnp.exp(mech.log_K)), axis=(-2, -1))))\n"
        "register(Relation(id='NEGL', statement='s', premise='ldp', conclusion='minus_tv',\n"
        "                  bound=lambda x, *p: x))\n")
    same = tmp_path / "same.json"
    same.write_text('{"K": [[0.3, 0.7], [0.3, 0.7]]}')
    done = _jaxpriv("check", "NEGB", same, "--plugin", plugin)
    assert done.returncode == 1, done.stderr
    assert re.search(r"slack\s+-inf", done.stdout) and "VIOLATED" in done.stdout
    done = _jaxpriv("check", "NEGL", ROOT / "examples" / "krr4.json", "--plugin", plugin)
    assert done.returncode == 2 and done.stderr.count("\n") == 1, done.stderr
    assert "'minus_tv' (conclusion) is negative" in done.stderr and "neg.py:5" in done.stderr


@pytest.mark.parametrize("body,message", [
    ("def broken(:\n", "syntax error at line 1"),
    ("raise RuntimeError('boom')\n", "line 1\\): RuntimeError: boom"),
    # a plugin's SystemExit ended jaxpriv silently with the plugin's status (exit 0)
    ("x = 1\nraise SystemExit(0)\n", "line 2\\): SystemExit: 0 \\(while it was loaded\\)"),
    ("from jaxpriv import Relation, register\n"
     "register(Relation(id='B1', statement='s', premise='ldp', conclusion='nowhere', "
     "bound=lambda x, *p: x))\n", "unknown notion 'nowhere'"),
    ("from jaxpriv import Notion, register\nregister(Notion('b', 3))\n",
     "level must be a function"),
])
def test_a_broken_plugin_is_one_line_and_exit_2(tmp_path, body, message):
    plugin = tmp_path / "broken.py"
    plugin.write_text(body)
    done = _jaxpriv("relations", "--plugin", plugin)
    assert done.returncode == 2
    assert done.stderr.count("\n") == 1, done.stderr
    assert re.search(message, done.stderr), done.stderr
    assert "Traceback" not in done.stderr
    assert _jaxpriv("relations", "--plugin", tmp_path / "none.py").stderr.endswith(
        "no such file\n")


def test_installed_packages_register_through_entry_points(tmp_path, monkeypatch):
    (tmp_path / "my_claims.py").write_text(TV.read_text().replace('"tv_rows"', '"tv_ep"')
                                           .replace('"TV1"', '"TVEP"'))
    monkeypatch.syspath_prepend(str(tmp_path))
    point = importlib.metadata.EntryPoint("mine", "my_claims", registry.PLUGIN_GROUP)
    monkeypatch.setattr(importlib.metadata, "entry_points",
                        lambda group=None: [point] if group == registry.PLUGIN_GROUP else [])
    try:
        registry.load_plugins()
        assert registry.get("TVEP").conclusion == "tv_ep"
        assert not registry.get("TVEP").check(families.randomized_response(2.0)).violated
    finally:
        registry.unregister("TVEP")
        registry.unregister("tv_ep")


# -- the shape of the code ---------------------------------------------------------------------

# the layers import one way, and no engine names a relation: tests/test_layers.py


def test_engines_run_every_registered_mechanism_relation_from_its_record():
    """Sweep and search configurations come from each record alone (no per-id table)."""
    for rid, relation in registry.REGISTRY.items():
        if relation.kind != "mechanism":
            continue
        layout = {"k": 2, "r": 2} if relation.needs_records else {}
        config = sweep.make_config(rid, 4, 3, 1000, **layout)
        assert config.x_max == relation.sampling.x_max
        assert sweep.sampler_spec(config).prior == relation.sampling.prior
        grid = search.clip_grid(relation, (0.1, 0.2, 0.3))
        search.make_config(rid, 4, 3, grid, **layout)
    assert audit.relation_ids("R1,R2") == ["R1", "R2"]


def test_a_nan_bound_or_level_is_one_line_naming_its_source_never_holds(tmp_path):
    """A NaN compares false, so unchecked it reads "holds" (slack nan, exit 0): `check` refuses
    it in one line naming the relation, the premise level and the file and line of the bound
    (or of the notion whose level is NaN), exit 2."""
    plugin = tmp_path / "nan_claims.py"
    plugin.write_text(
        "import jax.numpy as jnp\n"
        "from jaxpriv import Notion, Relation, register\n"
        "register(Relation(id='NANB', statement='LDP ⇒ TV ≤ NaN', premise='ldp',\n"
        "                  conclusion='tv', bound=lambda x, *p: x * jnp.nan))\n"
        "def broken(mech, **params):\n"
        "    return jnp.sqrt(-1.0 - mech.log_K[..., 0, 0] ** 2)\n"
        "register(Notion('broken_level', broken, doc='a level that is NaN'))\n"
        "register(Relation(id='NANL', statement='LDP ⇒ broken ≤ 1', premise='ldp',\n"
        "                  conclusion='broken_level', bound=lambda x, *p: x + 1.0))\n")
    krr = ROOT / "examples" / "krr4.json"
    done = _jaxpriv("check", "--plugin", plugin, "NANB", krr)
    assert done.returncode == 2 and done.stderr.count("\n") == 1, done.stderr
    assert "relation NANB: its bound is NaN at premise ldp = " in done.stderr
    assert f"{plugin}:4" in done.stderr and "holds" not in done.stdout  # the lambda's line
    done = _jaxpriv("check", "--plugin", plugin, "NANL", krr, "--json")
    assert done.returncode == 2 and done.stderr.count("\n") == 1, done.stderr
    assert "the level of notion 'broken_level' (conclusion) is NaN" in done.stderr
    assert f"{plugin}:5" in done.stderr and done.stdout == ""
