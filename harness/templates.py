"""Templates of an external server's command and files: `{name}` puts in one of a few named
values, and nothing else does anything.

str.format would also follow `{workdir.__class__...}` into the harness's objects, index,
convert, and pad to any width a format spec asks (`{port:>3000000000}` allocates 3 GB), so
a template is parsed with string.Formatter and every field must be a bare name."""

from __future__ import annotations

import string
from collections.abc import Collection, Mapping
from dataclasses import dataclass

from harness.yamlfile import quote

# Linux refuses one argument longer than MAX_ARG_STRLEN (32 pages, with its NUL): E2BIG.
MAX_ARG_BYTES = 32 * 4096 - 1
# All arguments together: execve's limit is a quarter of the stack limit (2 MiB at the usual
# 8 MiB) shared with the environment.
MAX_ARGV_BYTES = 1 << 20


@dataclass(frozen=True)
class Template:
    """A template's literal text and named fields, in order."""

    pieces: tuple[tuple[str, str | None], ...]  # (literal, field name or None)

    @classmethod
    def parse(cls, text: str, fields: Collection[str], where: str) -> Template:
        """ValueError naming where and the fix for anything but literal text and {FIELD}."""
        names = ", ".join("{" + name + "}" for name in fields)
        fix = f"fix: use {names}, each as it is, and write a literal brace as {{{{ or }}}}"
        try:
            parsed = list(string.Formatter().parse(text))
        except ValueError as exc:
            raise ValueError(f"{where} is not a valid template ({exc}); {fix}") from None
        pieces = []
        for literal, name, spec, conversion in parsed:
            if name is not None and (name not in fields or spec or conversion):
                written = "{" + name + (f"!{conversion}" if conversion else "") + (
                    f":{spec}" if spec else "") + "}"
                raise ValueError(f"{where} uses {quote(written)[1:-1]}, which is not one of "
                                 f"{names} (no attributes, indexes, conversions or format "
                                 f"specs); {fix}")
            pieces.append((literal, name))
        return cls(tuple(pieces))

    def size(self, lengths: Mapping[str, int]) -> int:
        """Bytes of the filled text, given each field's length in bytes (nothing is built)."""
        return sum(len(literal.encode()) + (lengths[name] if name else 0)
                   for literal, name in self.pieces)

    def fill(self, values: Mapping[str, str]) -> str:
        return "".join(literal + (values[name] if name else "") for literal, name in self.pieces)


def check_sizes(command: list[Template], files: list[Template], lengths: Mapping[str, int],
                files_limit: int) -> None:
    """ValueError when the filled command could not be executed, or the files would hold
    more than files_limit bytes together."""
    for i, template in enumerate(command):
        if template.size(lengths) > MAX_ARG_BYTES:
            raise ValueError(f"command[{i}] fills to more than {MAX_ARG_BYTES:,} bytes, the "
                             f"kernel's limit on one argument; fix: put it in a file")
    if sum(template.size(lengths) for template in command) > MAX_ARGV_BYTES:
        raise ValueError(f"the command fills to more than {MAX_ARGV_BYTES:,} bytes; fix: put "
                         f"its arguments in a file")
    if sum(template.size(lengths) for template in files) > files_limit:
        raise ValueError(f"files fill to more than {files_limit:,} bytes together; fix: "
                         f"fewer or smaller files, or {{body}} fewer times")
