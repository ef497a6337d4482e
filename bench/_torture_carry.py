"""The daemon torture's carried values: what each generation carries, who created, received,
refused and disposed each value, and the provider source that carries them.

Every provider version of ``bench/torture_daemon.py`` carries a counter (``scope.carry(
"counter", ..., version=..., accept=...)``) and, unless the version drops it, a real
listening socket (``scope.carry("listener", ..., version=...)``). Edits change the counter's
``version``, what its ``accept`` takes (an epoch), the listener's ``version``, or drop and
carry again the listener, so values are refused and re-created, handed over, and let go.

:class:`CarryLedger` checks each carry as it happens and each disposal as it runs:

* *disposed twice* — a value's ``dispose`` ran more than once;
* *disposed while carried* — ``dispose`` ran while a generation that carries the value had
  not begun closing (or a generation was handed a value already disposed);
* *another object without a refusal* — a successor got another object than its serving
  predecessor's although its ``version`` and ``accept`` took the predecessor's value;
* *a refused value* — a successor got a value its ``version`` or ``accept`` refused;
* *socket closed while carried* — a carried listening socket was found closed (or not
  accepting a connection) while a generation carried it, or was closed before its dispose.

*Never disposed* is counted once the reloader has closed (:meth:`CarryLedger.never_disposed`).
"""

from __future__ import annotations

import ast
import random
import socket
from dataclasses import dataclass, field
from typing import Any

from _torture_ledger import Generation, Ledger, Report, Settings

from hotseam import ScopeState

__all__ = [
    "CARRY_ZERO",
    "PROVIDER_SOURCE",
    "CarryGeneration",
    "CarryLedger",
    "CarryPlan",
    "Carried",
    "plan_of",
]

DISPOSED_TWICE = "carried value disposed twice"
DISPOSED_CARRIED = "carried value disposed while a live generation carries it"
NEVER_DISPOSED = "carried value never disposed"
ANOTHER_OBJECT = "successor given another object without a refusal"
REFUSED_GIVEN = "successor given a value it refused"
SOCKET_CLOSED = "carried socket closed while still carried"
CARRY_ZERO = (
    DISPOSED_TWICE,
    DISPOSED_CARRIED,
    NEVER_DISPOSED,
    ANOTHER_OBJECT,
    REFUSED_GIVEN,
    SOCKET_CLOSED,
)

PROVIDER_SOURCE = """\
import torture_ledger
import torture_words as words
from hotseam.interaction import USER_INTERACTION

VERSION = {version}
CARRY = {carry!r}
{module_line}

class Provider:
    multiple_questions = VERSION % 2 == 1  # the other versions show one question at a time

    def __init__(self, scope, generation):
        self.scope = scope
        self.generation = generation

    async def ask(self, request):
        return await torture_ledger.serve(self, request)


def setup(scope):
    generation = torture_ledger.set_up(__name__, VERSION, words.WORD, scope, CARRY)
    counter_version, epoch, listener_version = CARRY
    counter = scope.carry(
        "counter",
        lambda: torture_ledger.new_counter(generation, counter_version, epoch),
        dispose=torture_ledger.dispose,
        version=counter_version,
        accept=lambda counter: counter.epoch == epoch,
    )
    torture_ledger.carried(generation, "counter", counter)
    if listener_version is not None:
        listener = scope.carry(
            "listener",
            lambda: torture_ledger.new_listener(generation, listener_version),
            dispose=torture_ledger.dispose,
            version=listener_version,
        )
        torture_ledger.carried(generation, "listener", listener)
    provider = Provider(scope, generation)
    scope.provide(USER_INTERACTION, provider)

    async def close():
        await torture_ledger.close(provider, {disposer!r})

    scope.defer(close)
{setup_line}
"""


@dataclass(frozen=True)
class CarryPlan:
    """What a provider version carries: the counter's version and the epoch its ``accept``
    wants, the listener's version (``None``: not carried)."""

    counter_version: int = 1
    epoch: int = 1
    listener_version: int | None = 1

    def as_tuple(self) -> tuple[int, int, int | None]:
        return (self.counter_version, self.epoch, self.listener_version)


def plan_of(source: str) -> CarryPlan:
    """The plan written in a provider source's ``CARRY = (...)`` line."""
    for line in source.splitlines():
        if line.startswith("CARRY = "):
            return CarryPlan(*ast.literal_eval(line.removeprefix("CARRY = ")))
    raise ValueError("no CARRY line in the provider source")


@dataclass(eq=False, repr=False)
class Carried:
    """One carried value (the counter is this object; the listener's value is ``listener``)."""

    key: str
    serial: int
    version: int
    epoch: int | None
    creator: CarryGeneration
    listener: socket.socket | None = None
    carriers: list[CarryGeneration] = field(default_factory=list)
    disposals: int = 0
    count: int = 0

    def __repr__(self) -> str:
        epoch = "" if self.epoch is None else f" epoch {self.epoch}"
        return f"{self.key}#{self.serial}(v{self.version}{epoch}, made by {self.creator!r})"


@dataclass(eq=False, repr=False)
class CarryGeneration(Generation):
    """A generation of the daemon torture's provider, and what it carries."""

    scope: Any = None
    plan: CarryPlan = field(default_factory=CarryPlan)
    predecessor: CarryGeneration | None = None
    """The generation of the same module serving when this one was set up."""
    state: str = "staged"  # staged → serving → replaced or unloaded
    carried: dict[str, Carried] = field(default_factory=dict)

    def live(self) -> bool:
        """Set up and not closing (staged or serving)."""
        return self.closing_since is None and self.scope.state is ScopeState.OPEN


class CarryLedger(Ledger):
    """The torture ledger plus every carried value, checked as it is carried and disposed."""

    def __init__(self, rng: random.Random, settings: Settings, report: Report) -> None:
        super().__init__(rng, settings)
        self.report = report
        self.info = report.section("carry")
        self.values: list[Carried] = []
        self._listeners: dict[int, Carried] = {}
        self.serving: dict[str, CarryGeneration] = {}
        self._probe = random.Random(settings.seed + 3)

    def exported(self) -> dict[str, Any]:
        return {
            **super().exported(),
            "new_counter": self.new_counter,
            "new_listener": self.new_listener,
            "carried": self.carried,
            "dispose": self.dispose,
        }

    def set_up(  # type: ignore[override]
        self, module: str, version: int, word: str, scope: Any, plan: tuple[Any, ...]
    ) -> CarryGeneration:
        generation = CarryGeneration(
            len(self.generations) + 1, module, version, word, scope=scope, plan=CarryPlan(*plan)
        )
        generation.predecessor = self.serving.get(module)
        self.generations.append(generation)
        return generation

    # -- what the reload events say ---------------------------------------------------------------

    def committed(self, module: str) -> None:
        """The newest staged generation of ``module`` serves; its predecessor is replaced."""
        newest = next((g for g in reversed(self.generations) if g.module == module), None)
        if not isinstance(newest, CarryGeneration) or newest.state != "staged":
            return  # a helper, or a module whose setup never ran
        old = self.serving.get(module)
        if old is not None:
            old.state = "replaced"
        newest.state = "serving"
        self.serving[module] = newest

    def unloaded(self, module: str) -> None:
        old = self.serving.pop(module, None)
        if old is not None:
            old.state = "unloaded"

    # -- the values -------------------------------------------------------------------------------

    def new_counter(self, generation: CarryGeneration, version: int, epoch: int) -> Carried:
        value = Carried("counter", len(self.values) + 1, version, epoch, generation)
        self.values.append(value)
        self.info["counters made"] += 1
        return value

    def new_listener(self, generation: CarryGeneration, version: int) -> socket.socket:
        listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        listener.bind(("127.0.0.1", 0))
        listener.listen(8)
        listener.settimeout(2.0)
        value = Carried("listener", len(self.values) + 1, version, None, generation, listener)
        self.values.append(value)
        self._listeners[id(listener)] = value
        self.info["listening sockets made"] += 1
        return listener

    def record_of(self, value: object) -> Carried:
        if isinstance(value, Carried):
            return value
        return self._listeners[id(value)]

    def carried(self, generation: CarryGeneration, key: str, value: object) -> None:
        """``generation``'s setup got ``value`` for ``key``: was it the right one?"""
        record = self.record_of(value)
        record.carriers.append(generation)
        generation.carried[key] = record
        plan = generation.plan
        version = plan.counter_version if key == "counter" else plan.listener_version
        takes = record.version == version and (key != "counter" or record.epoch == plan.epoch)
        fresh = record.creator is generation
        predecessor = generation.predecessor
        offered = None
        if predecessor is not None and predecessor.live():
            offered = predecessor.carried.get(key)
        if record.disposals:
            self.report.count(
                DISPOSED_CARRIED, f"{generation!r} was handed {record!r}, already disposed"
            )
        if record.listener is not None and record.listener.fileno() == -1:
            self.report.count(SOCKET_CLOSED, f"{generation!r} was handed {record!r}, closed")
        if not fresh and not takes:
            self.report.count(
                REFUSED_GIVEN,
                f"{generation!r} (plan {plan.as_tuple()}) was given {record!r}",
            )
        if offered is None:
            if not fresh:  # a renamed module took over what the unloaded one carried
                self.info[f"{key}: taken over by a renamed module"] += 1
            return
        offered_takes = offered.version == version and (
            key != "counter" or offered.epoch == plan.epoch
        )
        if offered_takes and record is not offered:
            self.report.count(
                ANOTHER_OBJECT,
                f"{generation!r} got {record!r}, its predecessor {predecessor!r} carried "
                f"{offered!r} (same version, accepted)",
            )
        elif offered_takes:
            self.info[f"{key}: handed over"] += 1
        elif fresh:
            self.info[f"{key}: refused and made again"] += 1

    def entered(self, provider: Any) -> None:
        """Three asks in ten use the carried socket: one connection made and accepted."""
        listener = provider.generation.carried.get("listener")
        if listener is None or self._probe.random() >= 0.3:
            return
        sock = listener.listener
        problem = None
        if sock.fileno() == -1:
            problem = "closed"
        else:
            try:
                with socket.create_connection(sock.getsockname(), timeout=2.0):
                    accepted, _ = sock.accept()
                    accepted.close()
            except OSError as error:
                problem = f"{type(error).__name__}: {error}"
        self.info["connections through a carried socket"] += problem is None
        if problem is not None:
            self.report.count(
                SOCKET_CLOSED, f"{listener!r} carried by {provider.generation!r}: {problem}"
            )

    def dispose(self, value: object) -> None:
        """A carried value's ``dispose``: once, when no live generation carries it."""
        record = self.record_of(value)
        record.disposals += 1
        self.info[f"{record.key}s disposed"] += 1
        if record.disposals > 1:
            self.report.count(DISPOSED_TWICE, f"{record!r} disposed {record.disposals} times")
        live = [g for g in record.carriers if g.live()]
        if live:
            self.report.count(
                DISPOSED_CARRIED, f"{record!r} disposed while {live} carry it (not closing)"
            )
        if record.listener is not None:
            if record.listener.fileno() == -1 and record.disposals == 1:
                self.report.count(SOCKET_CLOSED, f"{record!r} was closed before its dispose")
            record.listener.close()

    def never_disposed(self) -> None:
        """Once the reloader has closed: every value was disposed."""
        for record in self.values:
            if record.disposals == 0:
                carriers = ", ".join(f"{g!r} ({g.state})" for g in record.carriers)
                self.report.count(NEVER_DISPOSED, f"{record!r}, carried by {carriers or 'none'}")
                if record.listener is not None:
                    record.listener.close()
