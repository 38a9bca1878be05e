"""A griffe extension for the site: the docstrings' Sphinx roles (:func:`x`, :class:`~a.B`, ...)
become code spans, which Markdown renders as ``x``, ``a.B`` (mkdocstrings renders Markdown, and
would print the role as written). Loaded by mkdocs.yml; not part of the package."""

import re

import griffe

ROLE = re.compile(r":(?:py:)?(?:func|class|mod|meth|attr|data|obj|exc|const|term):`~?([^`]+)`")


class SphinxRoles(griffe.Extension):
    def on_instance(self, *, obj, **kwargs) -> None:
        if obj.docstring is not None:
            obj.docstring.value = ROLE.sub(r"`\1`", obj.docstring.value)
