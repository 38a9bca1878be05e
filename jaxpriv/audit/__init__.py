"""The audit: every registered relation swept, searched, certified where a closed form exists,
and judged — the job ``jaxpriv audit`` runs.

For each relation the audit runs a random sweep (:mod:`jaxpriv.engines.sweep`; for a claim about an
estimator, its relation's strategies) into ``DIR/<id>/sweep`` and an adversarial search
(:mod:`jaxpriv.engines.search`) into ``DIR/<id>/search``, each with the run-directory contract of those
modules; then it evaluates the certified envelope (:mod:`jaxpriv.engines.certify`) on the search grid and
condenses the three into one :class:`Verdict`. Every violation it counts was re-verified in
float64 from the saved witness file by the engine that found it.

The pieces: :mod:`jaxpriv.audit.plans` (budgets, the runs of every relation, their directories),
:mod:`jaxpriv.audit.runner` (running them, in worker processes or not, resuming, the audit's
summary), :mod:`jaxpriv.audit.verdict` (verdict rules, :func:`assess`). The audit writes its
files with writers the layer above passes in (:class:`Outputs`);
:func:`jaxpriv.report.run_audit` is :func:`run` with the report's.

Verdict rules (:mod:`jaxpriv.audit.verdict`):

* **violated**: at least one verified witness; the worst slack is the lowest verified one. A
  certified least slack below 1 with no witness at the budget reads "violated (certified)".
* otherwise the worst slack ``s`` is the least slack of any witness the sweep and search kept,
  and of the certified curve on the grid (each is attained by a real mechanism, so ``s`` is an
  upper bound on the true least slack, exact where certified): **tight** if ``s ≤ 1.01``, else
  **loose by ×s**.

Resumable: a run whose ``summary.json`` exists with the same configuration is not run again, a
sweep or search with a checkpoint continues from it, and ``DIR/summary.json`` is rewritten after
every relation, so a killed audit loses at most the run in flight's unfinished chunk.

Examples:
  >>> from jaxpriv import audit
  >>> audit.BUDGETS["quick"].sweep_count
  20000
"""

from jaxpriv.audit.plans import (BUDGETS, PLAN, SUMMARY, Budget, Task, budget, checkpoint_file,
                                 plan, relation_ids, run_dir)
from jaxpriv.audit.runner import (ORPHAN_POLL, WORKER_LOCK_WAIT, Outputs, default_workers, run,
                                  run_task)
from jaxpriv.audit.verdict import (CERTIFIED_PARAMETERS, CERTIFIED_TOWARDS_ZERO, TIGHT_SLACK,
                                   Verdict, assess, certified_region, format_number,
                                   verdict_label)

__all__ = ["BUDGETS", "CERTIFIED_PARAMETERS", "CERTIFIED_TOWARDS_ZERO", "ORPHAN_POLL", "Outputs",
           "PLAN", "SUMMARY", "TIGHT_SLACK", "WORKER_LOCK_WAIT", "Budget", "Task", "Verdict",
           "assess", "budget", "certified_region", "checkpoint_file", "default_workers",
           "format_number", "plan", "relation_ids", "run", "run_dir", "run_task",
           "verdict_label"]
