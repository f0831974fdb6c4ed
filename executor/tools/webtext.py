"""What ``web_fetch`` hands the model: a page's text, HTML turned into Markdown.

HTML is parsed by Beautiful Soup (Python's own ``html.parser``: no native parser
to trust) and turned into Markdown by ``markdownify``; scripts, styles,
templates, frames and forms are dropped first (their text is code, not
content), so is every comment. Other text (plain, JSON, XML) is decoded as it
came. Nothing here reaches the network.
"""

from __future__ import annotations

import re

from bs4 import BeautifulSoup, Comment
from markdownify import MarkdownConverter

__all__ = ["HTML_TYPES", "TEXT_TYPES", "allowed_type", "decode", "page_text"]

#: The content types fetched as HTML (turned into Markdown).
HTML_TYPES = frozenset({"text/html", "application/xhtml+xml"})
#: Non-``text/*`` types fetched as text.
TEXT_TYPES = frozenset({"application/json", "application/xml", "application/javascript",
                        "application/x-yaml", "application/yaml", "application/toml"})
_DROPPED = ("script", "style", "noscript", "template", "iframe", "object", "embed", "svg",
            "canvas", "form", "head")
_BLANK_RUNS = re.compile(r"\n{3,}")


def allowed_type(mime: str) -> bool:
    """Whether a response of media type ``mime`` (lower case, no parameters) is read."""
    return (mime.startswith("text/") or mime in HTML_TYPES or mime in TEXT_TYPES
            or mime.endswith(("+json", "+xml")))


def decode(body: bytes, charset: str | None) -> str:
    """``body`` as text in its declared ``charset`` (UTF-8 when none or unknown)."""
    try:
        return body.decode(charset or "utf-8", errors="replace")
    except LookupError:
        return body.decode("utf-8", errors="replace")


def page_text(text: str, mime: str) -> str:
    """What the model reads of a body of type ``mime``: Markdown for HTML, else as is."""
    if mime not in HTML_TYPES:
        return text
    soup = BeautifulSoup(text, "html.parser")
    title = soup.title.get_text(" ", strip=True) if soup.title else ""
    for tag in soup(list(_DROPPED)):
        tag.decompose()
    for comment in soup.find_all(string=lambda node: isinstance(node, Comment)):
        comment.extract()
    markdown = MarkdownConverter(heading_style="ATX", bullets="-").convert_soup(soup)
    markdown = _BLANK_RUNS.sub("\n\n", markdown).strip()
    return f"# {title}\n\n{markdown}" if title and title not in markdown[:200] else markdown
