"""Read the files a user hands graphroof (op tables, hardware profiles, transformers configs) safely.

Every reader here fails with the caller's :class:`~graphroof.errors.GraphroofError` subclass and a one-line
message that names the file, the problem and the fix; none of them hangs or eats the machine:

* :func:`read_text`: regular files only, after resolving symlinks (a FIFO would block, ``/dev/zero`` never
  ends), at most :data:`MAX_FILE_BYTES`, UTF-8 (a leading byte-order mark, as Excel's "CSV UTF-8" writes, is
  dropped).
* :func:`parse_json`, :func:`parse_yaml`, :func:`parse_toml`: nesting at most :data:`MAX_DEPTH` levels; YAML
  aliases (``*name``, the "billion laughs" expansion) are refused and YAML documents hold at most
  :data:`MAX_YAML_NODES` nodes.
* :func:`number`: a finite float from a parsed value (no 400-digit integer ``OverflowError``, NaN named as
  such).
* :func:`clean_name` makes a name from a file printable (control characters, terminal escapes and bidi
  overrides escaped) and :func:`shown` quotes a value for a message: cleaned and cut to :data:`QUOTE_CHARS`.
"""

from __future__ import annotations

import json
import math
import os
import reprlib
import stat
from pathlib import Path
from typing import Any

from .errors import GraphroofError, InputError, sanitize_terminal

__all__ = ["MAX_FILE_BYTES", "MAX_DEPTH", "MAX_YAML_NODES", "QUOTE_CHARS", "read_text", "parse_json",
           "parse_yaml", "parse_toml", "number", "clean_name", "shown", "shown_path"]

#: The largest op table, hardware profile or config read (decimal bytes; real ones are kilobytes).
MAX_FILE_BYTES = 64 * 10**6
#: The deepest nesting of lists / mappings accepted (real profiles and configs nest 2-5 levels).
MAX_DEPTH = 64
#: The most nodes (scalars, lists, mappings) a YAML document may hold.
MAX_YAML_NODES = 4_000_000
#: How many characters of a value an error message quotes.
QUOTE_CHARS = 80

_Err = type[GraphroofError]


def clean_name(s: object) -> str:
    r"""*s* as printable text for a model, op or layer name: control characters (ESC, BEL, NUL, CR), C1 codes
    and bidi overrides become ``\xNN`` / ``\uNNNN`` text (:func:`graphroof.errors.sanitize_terminal`).

    >>> clean_name("a\x1b[31mb\u202e")
    'a\\x1b[31mb\\u202e'
    """
    return sanitize_terminal(s)


_REPR = reprlib.Repr()
_REPR.maxstring = QUOTE_CHARS
_REPR.maxother = QUOTE_CHARS
_REPR.maxlist = _REPR.maxtuple = _REPR.maxdict = _REPR.maxset = 4
_REPR.maxlevel = 2


def shown(value: object, limit: int = QUOTE_CHARS) -> str:
    r"""*value* quoted for an error message: ``repr`` style, cleaned of control characters, at most about *limit*
    characters (a long value ends in ``...``); huge integers are described, not printed.

    >>> shown("x" * 200)[-6:], shown("a\x1b[31m"), shown(10**400)
    ('xxx...', "'a\\x1b[31m'", 'an integer of 401 digits')
    """
    if isinstance(value, int) and not isinstance(value, bool) and value.bit_length() > 3 * limit:
        return f"an integer of {len(str(abs(value))) if value.bit_length() < 14000 else 'over 4000'} digits"
    try:
        text = repr(value[:limit + 1]) if isinstance(value, str) else _REPR.repr(value)
        text = sanitize_terminal(text)
    except Exception:  # noqa: BLE001 - an odd object's __repr__ must not hide the real error
        text = f"<a {type(value).__name__}>"
    return text if len(text) <= limit else text[:limit] + "..."


def shown_path(path: str | Path, limit: int = 160) -> str:
    """A file path for a message: cleaned of control characters, a long one cut to its last *limit* characters."""
    text = sanitize_terminal(str(path))
    return text if len(text) <= limit else "..." + text[-limit:]


def _kind(mode: int) -> str:
    for test, name in ((stat.S_ISDIR, "a directory"), (stat.S_ISFIFO, "a FIFO (named pipe)"),
                       (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
                       (stat.S_ISSOCK, "a socket")):
        if test(mode):
            return name
    return "not a regular file"


def read_bytes(path: str | Path, what: str, error: _Err = InputError, limit: int | None = None) -> bytes:
    """The bytes of the regular file *path* (symlinks followed), at most *limit* of them (default
    :data:`MAX_FILE_BYTES`).

    *what* names the file in messages (``"op table"``).  The file is opened non-blocking and checked again on
    the open descriptor, so a FIFO or device swapped in after the first check is refused, never read.
    """
    p = Path(path)
    name = shown_path(p)
    limit = MAX_FILE_BYTES if limit is None else limit
    try:
        st = os.stat(p)
    except OSError as e:
        raise error(f"{name}: cannot read {what} ({e.strerror or e})") from None
    if not stat.S_ISREG(st.st_mode):
        raise error(f"{name}: {what} is {_kind(st.st_mode)}, not a regular file; pass a file (a symlink is "
                    "fine when it points to a regular file)")
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0) | getattr(os, "O_CLOEXEC", 0)
    try:
        fd = os.open(p, flags)
    except OSError as e:
        raise error(f"{name}: cannot read {what} ({e.strerror or e})") from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise error(f"{name}: {what} is {_kind(st.st_mode)}, not a regular file; pass a file")
        if st.st_size > limit:
            raise error(f"{name}: {what} is {st.st_size:,} bytes, over the {limit / 1e6:g} MB cap for {what}s; "
                        f"is this the right file?")
        chunks, total = [], 0
        while True:  # read to the end, never past the cap (a file still growing is cut off here)
            chunk = os.read(fd, min(1 << 20, limit + 1 - total))
            if not chunk:
                break
            chunks.append(chunk)
            total += len(chunk)
            if total > limit:
                raise error(f"{name}: {what} is over the {limit / 1e6:g} MB cap for {what}s; is this the right file?")
    except OSError as e:
        raise error(f"{name}: cannot read {what} ({e.strerror or e})") from None
    finally:
        os.close(fd)
    return b"".join(chunks)


def read_text(path: str | Path, what: str, error: _Err = InputError, limit: int | None = None) -> str:
    """:func:`read_bytes` decoded as UTF-8; a leading byte-order mark is dropped."""
    data = read_bytes(path, what, error, limit)
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise error(f"{shown_path(path)}: {what} is not UTF-8 text (byte 0x{data[e.start]:02x} at offset "
                    f"{e.start}); save it as UTF-8") from None
    return text[1:] if text.startswith("\ufeff") else text


def _too_deep(where: str, error: _Err) -> GraphroofError:
    return error(f"{where}: nested deeper than {MAX_DEPTH} levels; a real file nests a few levels, is this the "
                 "right file?")


def _invalid(where: str, fmt: str, e: Exception, error: _Err) -> GraphroofError:
    """"not valid JSON / TOML / YAML" with the parser's reason and place, on one line and never echoing input."""
    problem, mark = getattr(e, "problem", None), getattr(e, "problem_mark", None)  # a YAML error's reason, place
    text = f"{problem} at line {mark.line + 1}, column {mark.column + 1}" if problem and mark else str(e)
    if "Exceeds the limit" in text and "digits" in text:  # int(): Python's guard against 4,300-digit integers
        text = "a number has more than 4300 digits"
    reason = sanitize_terminal(" ".join(text.split()))
    return error(f"{where}: not valid {fmt}: {reason[:200]}")


def check_depth(data: Any, where: str, error: _Err = InputError, max_depth: int = MAX_DEPTH) -> Any:
    """*data* unchanged, or *error* when its lists / mappings nest deeper than *max_depth* (iterative walk)."""
    stack: list[tuple[Any, int]] = [(data, 1)]
    seen: set[int] = set()
    while stack:
        obj, depth = stack.pop()
        if not isinstance(obj, (dict, list, tuple)) or id(obj) in seen:
            continue
        if depth > max_depth:
            raise _too_deep(where, error)
        seen.add(id(obj))
        stack.extend((v, depth + 1) for v in (obj.values() if isinstance(obj, dict) else obj))
    return data


def parse_json(text: str, where: str, error: _Err = InputError) -> Any:
    """JSON *text* parsed; syntax errors, too-deep nesting and integers too long to read are *error*."""
    try:
        data = json.loads(text)
    except RecursionError:
        raise _too_deep(where, error) from None
    except ValueError as e:  # json.JSONDecodeError, or an integer over Python's digit limit
        raise _invalid(where, "JSON", e, error) from None
    return check_depth(data, where, error)


def parse_toml(text: str, where: str, error: _Err = InputError) -> Any:
    """TOML *text* parsed, with the same limits as :func:`parse_json`."""
    import tomllib

    try:
        data = tomllib.loads(text)
    except RecursionError:
        raise _too_deep(where, error) from None
    except ValueError as e:  # tomllib.TOMLDecodeError, or an integer over Python's digit limit
        raise _invalid(where, "TOML", e, error) from None
    return check_depth(data, where, error)


def parse_yaml(text: str, where: str, error: _Err = InputError) -> Any:
    """YAML *text* parsed safely: no aliases, at most :data:`MAX_DEPTH` levels and :data:`MAX_YAML_NODES` nodes.

    The events are checked first (streamed, constant memory), then the document is built by the safe loader.
    """
    import yaml

    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    depth = nodes = 0
    try:
        for ev in yaml.parse(text, Loader=loader):
            if isinstance(ev, yaml.AliasEvent):
                line = f" (line {ev.start_mark.line + 1})" if ev.start_mark is not None else ""
                raise error(f"{where}: YAML aliases (*name) are not accepted{line}; write the values out in full")
            if isinstance(ev, (yaml.ScalarEvent, yaml.SequenceStartEvent, yaml.MappingStartEvent)):
                nodes += 1
                if nodes > MAX_YAML_NODES:
                    raise error(f"{where}: more than {MAX_YAML_NODES:,} YAML values; is this the right file?")
            if isinstance(ev, (yaml.SequenceStartEvent, yaml.MappingStartEvent)):
                depth += 1
                if depth > MAX_DEPTH:
                    raise _too_deep(where, error)
            elif isinstance(ev, (yaml.SequenceEndEvent, yaml.MappingEndEvent)):
                depth -= 1
        return yaml.load(text, Loader=loader)  # noqa: S506 - a safe loader, checked above
    except GraphroofError:
        raise
    except RecursionError:
        raise _too_deep(where, error) from None
    except (yaml.YAMLError, ValueError) as e:
        raise _invalid(where, "YAML", e, error) from None


def number(value: Any, what: str, error: _Err = InputError) -> float:
    """*value* (an int or float from a parsed file) as a finite float, or *error* naming *what*: NaN is "not a
    number", an infinity or an integer beyond float range is "too large"."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise error(f"{what} must be a number, got {shown(value)}")
    try:
        v = float(value)
    except OverflowError:
        raise error(f"{what}: {shown(value)} is too large for a number (the limit is about 1.8e308); check the "
                    "value") from None
    if math.isnan(v):
        raise error(f"{what} is not a number (NaN); give a finite value")
    if math.isinf(v):
        raise error(f"{what} is infinite; give a finite value")
    return v
