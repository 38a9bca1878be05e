"""The outputs layer: run-directory files written from engine results (``summary.json``,
``envelope.csv``, figures) and the audit report. It reads what the engines computed and
verified (their witnesses are saved by the engines); engines never import it, and the audit
gets its writers passed in (:data:`AUDIT_OUTPUTS`, :func:`run_audit`).

The pieces: :mod:`jaxpriv.report.files` (a run directory's ``summary.json`` and
``envelope.csv``, with the output contract), :mod:`jaxpriv.report.figures` (what a relation's
figures show and a run's ``envelope.png`` — an audit's runs skip it, their relation's figure
shows both; the building blocks in
:mod:`jaxpriv.report.axes`), :mod:`jaxpriv.report.grid` (the audit's figures) and
:mod:`jaxpriv.report.audit_report` (``report.md``, ``report.html``, :func:`run_audit`).

Every number written here is a float64 level the engine recomputed from the saved witness.
"""

from jaxpriv.audit.verdict import format_number
from jaxpriv.engines.io import read_envelope
from jaxpriv.report.audit_report import (AUDIT_OUTPUTS, audit_table, grid_text, kind_text,
                                         run_audit, write_audit)
from jaxpriv.report.axes import (CERTIFIED, CLAIM, PANELS, SEARCH, SLACK_LABEL, SWEEP, VIOLATION,
                                 premise_label, value_label)
from jaxpriv.report.figures import (certificate_context, claimed_and_certified, draw_mechanism,
                                    draw_statistical, plot_envelope, plot_search,
                                    plot_statistical, sweep_envelope)
from jaxpriv.report.files import (ENVELOPE_COLUMNS, SEARCH_COLUMNS, STATISTICAL_COLUMNS,
                                  search_writer, write_csv, write_json, write_search,
                                  write_statistical, write_sweep)
from jaxpriv.report.grid import FIGURES, draw_relation, grid_legend, plot_grid, plot_relation

__all__ = ["AUDIT_OUTPUTS", "CERTIFIED", "CLAIM", "ENVELOPE_COLUMNS", "FIGURES", "PANELS",
           "SEARCH", "SEARCH_COLUMNS", "SLACK_LABEL", "STATISTICAL_COLUMNS", "SWEEP",
           "VIOLATION", "audit_table", "certificate_context", "claimed_and_certified",
           "draw_mechanism", "draw_relation", "draw_statistical", "format_number",
           "grid_legend", "grid_text", "kind_text", "plot_envelope", "plot_grid", "plot_relation",
           "plot_search", "plot_statistical", "premise_label", "read_envelope", "run_audit",
           "search_writer", "sweep_envelope", "value_label", "write_audit", "write_csv",
           "write_json", "write_search", "write_statistical", "write_sweep"]
