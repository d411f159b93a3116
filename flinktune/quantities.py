"""Every quantity flinktune takes from outside, with its unit and plausible range, checked in one place.

Use :func:`check` (or a :data:`Latency`-style annotated type on a pydantic field) wherever a
latency, recovery time, rate, price, utilization or duration enters: settings, CLI options,
fleet entries, profiling files, traces. A value outside its range is refused with ONE line that
names the value, its unit and the likely mistake ("--recovery-cap-s=180000 s: more than the
plausible 3600 s for a recovery time; did you mean 180 s (a value in milliseconds)?"); infinity and
NaN are refused everywhere. :func:`k8s_quantity`, :func:`cron`, :func:`tracking_uri` and :func:`dns_label` check the
text quantities the same way.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Annotated, Any
from urllib.parse import urlsplit

from pydantic import AfterValidator

__all__ = [
    "CPU_CORE_HOUR_PRICE",
    "DURATION_S",
    "LATENCY_MS",
    "MEMORY_GIB_HOUR_PRICE",
    "RATE",
    "RECOVERY_S",
    "UTILIZATION",
    "CronText",
    "K8sCpu",
    "K8sMemory",
    "Latency",
    "Quantity",
    "QuantityError",
    "Recovery",
    "TrackingUri",
    "check",
    "checked",
    "cron",
    "dns_label",
    "finite",
    "k8s_quantity",
    "tracking_uri",
]


class QuantityError(ValueError):
    """A value outside its unit's plausible range, not finite, or not of its kind; one line."""


@dataclass(frozen=True)
class Quantity:
    """A kind of value: its unit, its plausible range and what a value outside it usually is."""

    name: str
    unit: str
    low: float
    high: float
    #: ``v`` -> "did you mean ...?" for a value above ``high`` / below ``low`` (None: no guess).
    above: Callable[[float], str] | None = None
    below: Callable[[float], str] | None = None
    low_open: bool = False  # ``low`` itself refused (a latency of 0 ms)


def _at(where: str, value: object) -> str:
    return f"{where}={value!r}" if where else repr(value)


def _g(v: float) -> str:
    return f"{v:.6g}"


LATENCY_MS = Quantity(
    "latency", "ms", 1.0, 600_000.0,
    above=lambda v: f"did you mean {_g(v / 1000)} ms (a value in microseconds)?",
    below=lambda v: f"did you mean {_g(v * 1000)} ms (a value in seconds)?",
)  # fmt: skip
RECOVERY_S = Quantity(
    "recovery time", "s", 1.0, 3600.0,
    above=lambda v: f"did you mean {_g(v / 1000)} s (a value in milliseconds)?",
)  # fmt: skip
DURATION_S = Quantity(
    "duration", "s", 0.0, 7 * 86400.0, above=lambda v: f"did you mean {_g(v / 1000)} s (a value in milliseconds)?", low_open=True
)
RATE = Quantity("rate", "rec/s", 0.0, 1e9, above=lambda v: f"did you mean {_g(v / 1000)} rec/s (a per-millisecond count)?")
UTILIZATION = Quantity(
    "utilization (a fraction)", "", 0.0, 1.0, above=lambda v: f"did you mean {_g(v / 100)} (a percentage)?", low_open=True
)


def _hourly_price_hint(v: float) -> str:
    return f"did you mean {_g(v / 730)} (a monthly price) or {_g(v / 100)} (in cents)?"


CPU_CORE_HOUR_PRICE = Quantity("price", "per CPU core-hour", 0.0, 10.0, above=_hourly_price_hint)
MEMORY_GIB_HOUR_PRICE = Quantity("price", "per GiB-hour", 0.0, 5.0, above=_hourly_price_hint)


def finite(value: Any, where: str) -> float:
    """``value`` as a finite float, else one line naming ``where`` (infinity and NaN included)."""
    at = f"{where}: {value!r}" if where else repr(value)
    try:
        v = float(value)
    except (TypeError, ValueError):
        raise QuantityError(f"{at} is not a number") from None
    if not math.isfinite(v):
        raise QuantityError(f"{at} is not a finite number (give a plain number)")
    return v


def check(q: Quantity, value: Any, where: str) -> float:
    """``value`` as a float if it is a finite ``q`` inside its plausible range; else
    :class:`QuantityError` naming ``where``, the value, the unit and the likely mistake."""
    v = finite(value, where)
    head = (f"{where}={_g(v)} {q.unit}" if where else f"{_g(v)} {q.unit}").rstrip()
    if v > q.high:
        hint = f"; {q.above(v)}" if q.above else ""
        raise QuantityError(f"{head}: more than the plausible {_g(q.high)} {q.unit}".rstrip() + f" for a {q.name}{hint}")
    if v < q.low or (q.low_open and v == q.low):
        hint = f"; {q.below(v)}" if q.below and v > 0 else ""
        bound = f"more than {_g(q.low)}" if q.low_open else f"at least {_g(q.low)}"
        raise QuantityError(f"{head}: a {q.name} must be {bound} {q.unit}".rstrip() + hint)
    return v


def _checker(q: Quantity) -> Callable[[float], float]:
    def validate(value: float) -> float:
        # pydantic names the field; the message names the value and unit.
        return check(q, value, "")

    return validate


def checked(q: Quantity) -> AfterValidator:
    """A pydantic validator checking a float field against ``q`` (``Annotated[float, checked(RATE)]``)."""
    return AfterValidator(_checker(q))


#: pydantic field types: a float checked against its quantity.
Latency = Annotated[float, AfterValidator(_checker(LATENCY_MS))]
Recovery = Annotated[float, AfterValidator(_checker(RECOVERY_S))]

# Kubernetes quantities (resource.Quantity): decimal or binary suffixes, never "GB".
_K8S = re.compile(r"^(?P<n>[0-9]+(\.[0-9]+)?|\.[0-9]+)(?P<s>m|k|M|G|T|P|E|Ki|Mi|Gi|Ti|Pi|Ei)?$")
_K8S_FIX = {"KB": "Ki", "MB": "Mi", "GB": "Gi", "TB": "Ti", "K": "k", "KI": "Ki", "MI": "Mi", "GI": "Gi", "TI": "Ti"}


def k8s_quantity(text: str, where: str, *, kind: str = "memory") -> str:
    """``text`` if it is a Kubernetes quantity (``8Gi``, ``500m``, ``2``), else one line with the fix."""
    value = text.strip()
    if _K8S.fullmatch(value):
        if kind == "cpu" and value.endswith(("Ki", "Mi", "Gi", "Ti", "Pi", "Ei")):
            raise QuantityError(f"{_at(where, text)}: a CPU quantity is cores (2) or millicores (500m), not bytes")
        return value
    m = re.fullmatch(r"([0-9.]+)\s*([A-Za-z]+)", value)
    fix = _K8S_FIX.get(m.group(2).upper()) if m else None
    hint = f"; did you mean {m.group(1)}{fix}?" if m and fix else ""
    raise QuantityError(f"{_at(where, text)}: not a Kubernetes quantity (e.g. 8Gi, 512Mi, 2, 500m){hint}")


def _k8s(kind: str) -> Callable[[str], str]:
    return lambda text: k8s_quantity(text, "", kind=kind)


K8sCpu = Annotated[str, AfterValidator(_k8s("cpu"))]
K8sMemory = Annotated[str, AfterValidator(_k8s("memory"))]

_CRON_FIELDS = (("minute", 0, 59), ("hour", 0, 23), ("day of month", 1, 31), ("month", 1, 12), ("day of week", 0, 7))
_NAMES = {
    "jan": 1, "feb": 2, "mar": 3, "apr": 4, "may": 5, "jun": 6, "jul": 7, "aug": 8, "sep": 9, "oct": 10, "nov": 11,
    "dec": 12, "sun": 0, "mon": 1, "tue": 2, "wed": 3, "thu": 4, "fri": 5, "sat": 6,
}  # fmt: skip
_PRESETS = ("@hourly", "@daily", "@weekly", "@monthly", "@yearly", "@annually", "@midnight")


def _cron_number(token: str, low: int, high: int) -> bool:
    n = _NAMES.get(token.lower()) if not token.isdigit() else int(token)
    return n is not None and low <= n <= high


def cron(text: str, where: str, *, allow: tuple[str, ...] = ()) -> str:
    """``text`` if it is a five-field cron expression (or an ``@daily``-style preset, or one of
    ``allow``), else one line saying which field is wrong and what a cron looks like."""
    value = text.strip()
    if value in allow or value in _PRESETS:
        return value
    fields = value.split()
    example = "e.g. '*/5 * * * *' (minute hour day-of-month month day-of-week, UTC)"
    if len(fields) != 5:
        raise QuantityError(f"{_at(where, text)}: not a cron expression: {len(fields)} fields, need 5; {example}")
    for token, (name, low, high) in zip(fields, _CRON_FIELDS, strict=True):
        for part in token.split(","):
            base, _, step = part.partition("/")
            ok = not step or (step.isdigit() and int(step) > 0)
            if base != "*":
                lo, _, hi = base.partition("-")
                ok = ok and _cron_number(lo, low, high) and (not hi or _cron_number(hi, low, high))
            if not ok:
                raise QuantityError(f"{_at(where, text)}: cron {name} field {token!r} is not valid ({low}-{high}); {example}")
    return value


CronText = Annotated[str, AfterValidator(lambda text: cron(text, ""))]

_URI_SCHEMES = ("http", "https", "sqlite", "file", "postgresql", "mysql", "mssql", "databricks", "databricks-uc", "uc")


def tracking_uri(text: str, where: str) -> str:
    """``text`` if it is an MLflow tracking URI (``sqlite:///path``, ``http(s)://host``, a database URL,
    or an absolute path), else one line naming the accepted forms (user info never echoed)."""
    value = text.strip()
    m = re.fullmatch(r"([a-z][a-z0-9+.-]*):(//)?\S+", value)
    scheme = m.group(1).split("+")[0] if m else ""
    if value.startswith("/") or scheme in _URI_SCHEMES:
        if scheme in ("http", "https"):
            try:
                parts = urlsplit(value)
                host = parts.hostname if parts.port is None or parts.port > 0 else None
            except ValueError:  # a port that is no number, a bracket left open
                host = None
            if not host or not re.fullmatch(r"https?://\S+", value):
                raise QuantityError(f"{where or 'tracking URI'}: {scheme} URI without a valid host (and port)")
        return value
    shown = re.sub(r"//[^/@\s]*@", "//***@", value)
    raise QuantityError(
        f"{_at(where, shown)}: not a tracking URI; use sqlite:///<path>, http(s)://<host>:<port>, a database URL "
        "(postgresql://...) or an absolute path"
    )


TrackingUri = Annotated[str, AfterValidator(lambda text: tracking_uri(text, ""))]

_DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$")


def dns_label(text: str, where: str) -> str:
    """``text`` if it is a Kubernetes DNS-1123 label (namespaces, names), else one line saying the rule."""
    if not isinstance(text, str) or not _DNS_LABEL.fullmatch(text):
        raise QuantityError(
            f"{_at(where, text)}: not a Kubernetes name: use 1-63 lower-case letters, digits and dashes, "
            "starting and ending with a letter or digit (DNS-1123 label)"
        )
    return text
