"""The ``jaxpriv`` command line.

    jaxpriv eval FILE.json [--json]           every registered notion's level on a mechanism
    jaxpriv check RELATION FILE.json [--json] check one registered relation on a mechanism
    jaxpriv relations [--json]                the registered relations
    jaxpriv notions [--json]                  the registered notions
    jaxpriv sweep --relation R5 ...           random sweep of a relation (see --help)
    jaxpriv search --relation R5 ...          adversarial tightness search (see --help)
    jaxpriv audit [--budget quick] [--out DIR] every relation: sweep, search, certify, report
    jaxpriv show WITNESS.json                 a witness's levels, and its relation re-checked

Every command takes ``--plugin FILE.py`` (repeatable): a file that registers notions and
relations (:mod:`jaxpriv.registry`); installed ``jaxpriv.plugins`` entry points load too.

Exit status: 0 success (for ``check``: the bound holds or its condition does not apply),
1 ``check``, ``show``, ``sweep`` or ``search`` found the bound violated (verified in float64),
2 anything a user can cause — bad input, an unwritable or full disk, a damaged checkpoint, a
locked run directory, a broken plugin (one line on stderr naming it, never a traceback),
3 a bug in jaxpriv (a traceback, and a line asking to report it), 130 interrupted.
Everything is computed in float64.

The package: :mod:`jaxpriv.cli.entry` (the entry point and its exit statuses),
:mod:`jaxpriv.cli.parser` (the arguments), :mod:`jaxpriv.cli.commands` (``eval``, ``check``,
``show``, ``relations``, ``notions``), :mod:`jaxpriv.cli.runs` (``sweep``, ``search``,
``audit``) and :mod:`jaxpriv.cli.jaxsetup` (JAX started for the runs).
"""

from jaxpriv.cli.commands import evaluate_notions
from jaxpriv.cli.jaxsetup import COMPILATION_CACHE, GROUP_LOCAL, cache_directory
from jaxpriv.cli.entry import main

__all__ = ["COMPILATION_CACHE", "GROUP_LOCAL", "cache_directory", "evaluate_notions", "main"]
