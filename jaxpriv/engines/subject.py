"""Which engine runs a relation's subject, chosen in one place: a claim about mechanisms is swept
by :mod:`jaxpriv.engines.sweep` and searched by :mod:`jaxpriv.engines.search`; a claim about an
estimator (its subject a *setting*, e.g. ``(T, κ₁, ε)``) by :mod:`jaxpriv.engines.settings` in
either mode.

Examples:
  >>> from jaxpriv.catalog import seed_papers, statistical
  >>> from jaxpriv.engines import subject
  >>> subject.engine_for(seed_papers.R2, "search"), subject.engine_for(statistical.R14, "sweep")
  ('search', 'settings')
"""

from __future__ import annotations

from jaxpriv import registry
from jaxpriv.core.errors import InputError
from jaxpriv.engines import settings

MODES = settings.MODES
SETTINGS = "settings"
"""The name :func:`engine_for` gives the setting subject's engine."""


def engine_for(subject, mode: str) -> str:
    """The module of :mod:`jaxpriv.engines` that runs ``mode`` (``"sweep"`` or ``"search"``) for
    ``subject`` — a relation (its record or its id) or a config made for one: ``"settings"``
    (:data:`SETTINGS`) for a claim about an estimator, else ``mode`` itself (the mechanism
    engine of that name)."""
    if mode not in MODES:
        raise InputError(f"mode must be one of {', '.join(MODES)}, got {mode!r}")
    if isinstance(subject, settings.StatConfig):
        return SETTINGS
    if isinstance(subject, str):
        subject = registry.get(subject)
    if not hasattr(subject, "kind"):  # a mechanism engine's config (SweepConfig, SearchConfig)
        return mode
    return mode if subject.kind == "mechanism" else SETTINGS
