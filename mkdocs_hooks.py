"""mkdocs hooks: the docstrings' Sphinx roles (``:func:`x```) rendered as the code they name."""

from __future__ import annotations

import re
from typing import Any

_ROLE = re.compile(r":(?:mod|func|class|meth|attr|data|exc|obj):(<code>)~?")


def on_page_content(html: str, **kwargs: Any) -> str:
    return _ROLE.sub(r"\1", html)
