"""The session's state: settings, the engine pool, tokenizers, every result measured so far, and
the judging of each result against its SLOs and baseline.

Owned by the plugin (one per pytest session, kept in `config.stash`), never a module global.
"""

from __future__ import annotations

import os
import subprocess
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pytest_llmperf.client.measure import Endpoint, Measurement, measure
from pytest_llmperf.client.openai import ClientOptions
from pytest_llmperf.client.selfcheck import check_client
from pytest_llmperf.engines.errors import EngineDied, EngineError, EngineStalled
from pytest_llmperf.engines.pool import MAX_DEATHS, EnginePool
from pytest_llmperf.engines.spec import Engine
from pytest_llmperf.errors import InputError
from pytest_llmperf.failures import describe_counts
from pytest_llmperf.metrics.compute import RunMetrics, compute_metrics
from pytest_llmperf.metrics.result import Result, result_id
from pytest_llmperf.metrics.stats import Estimate
from pytest_llmperf.plugin.confirm_later import ConfirmLater
from pytest_llmperf.plugin.fixture import user_nodeid
from pytest_llmperf.reports import runfile
from pytest_llmperf.session.settings import Settings, usable_cores
from pytest_llmperf.verdict import baselines, gate
from pytest_llmperf.verdict import judge as checks
from pytest_llmperf.verdict.ab import ab_line, abba_order
from pytest_llmperf.verdict.status import Status
from pytest_llmperf.workloads.workload import Workload

GIT_TIMEOUT_S = 5
# More client processes than this only add start-up and merge time: 8 of them measured
# (estimated from ~100,000 chunks/s per process on a free core) far above any one server.
MAX_AUTO_WORKERS = 8
CLIENT_LIMITED = Status.CLIENT_LIMITED.summary  # a run the self-check refused
ENGINE_DIED = Status.ENGINE_DIED.summary  # a run its engine died in
RUNS_DIR = Path(".llmperf/runs")
# Machine-local first-run baselines (checks.BaselineTable.local): never committed.
LOCAL_BASELINES_DIR = Path(".llmperf/baselines")


@dataclass(frozen=True)
class PendingUpdate:
    ref: checks.BaselineRef
    entries: dict[str, baselines.BaselineEntry]
    provenance: dict[str, Any]
    local: bool = False  # this machine's first-run baseline (not a committed file)


@dataclass
class PausedAb:
    """An A/B measurement whose confirm pairs wait for the test's rerun (confirm_later.py):
    what it measured so far, and what it needs to go on in ABBA order."""
    sides: dict[str, Engine]
    workload: Workload
    runs: dict[str, list[tuple[RunMetrics, Measurement]]]
    starts: dict[str, float | None]


@dataclass
class LlmperfSession:
    settings: Settings
    pool: EnginePool
    hardware_class: str = "cpu"
    fingerprint: dict[str, Any] = field(default_factory=dict)
    results: list[Result] = field(default_factory=list)
    verdicts: dict[str, str] = field(default_factory=dict)
    # test id -> the gate settings its test declared, for the run file (see runfile.run_document)
    gates: dict[str, dict[str, Any]] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    # test id -> what the run file adds to that result: "ab" (side B's paired judgement,
    # ab.ab_entry) and "capacity" (a capacity probe's SLO and outcome), for `llmperf compare`
    # and the plots
    annotations: dict[str, dict[str, Any]] = field(default_factory=lambda: defaultdict(dict))
    pending: dict[str, list[PendingUpdate]] = field(default_factory=lambda: defaultdict(list))
    # test id -> an A/B measurement whose confirm pairs were deferred (run_ab, defer=True)
    paused_ab: dict[str, PausedAb] = field(default_factory=dict)
    extras: list[tuple[str, dict[str, Estimate], str]] = field(default_factory=list)
    engine_nice: int = 0
    gpu_count: int = 0  # GPUs this process may use (0 on CPU hardware)
    # Report payloads (outputs.payload) of this process and, on an xdist controller, its workers.
    payloads: list[dict[str, Any]] = field(default_factory=list)
    _tokenizers: dict[str, Any] = field(default_factory=dict)
    _saved_run: Any = None

    def __post_init__(self) -> None:
        self.pool.on_death = self._note_death

    # ------------------------------------------------------------------ measuring

    def tokenizer_for(self, engine: Engine):
        """The engine's tokenizer for prompt generation; for a model shipped as a bare
        architecture config (no tokenizer files), its vocabulary from config.json."""
        path = engine.tokenizer or engine.model
        if path not in self._tokenizers:
            from pytest_llmperf.workloads.prompts import load_tokenizer
            from pytest_llmperf.workloads.vocab import vocab_from_config

            try:
                self._tokenizers[path] = load_tokenizer(path)
            except FileNotFoundError as exc:
                vocab = vocab_from_config(path)
                if vocab is None:  # neither file: the test fails with the line, no traceback
                    raise InputError(str(exc)) from None
                self._tokenizers[path] = vocab
        return self._tokenizers[path]

    def endpoint_for(self, engine: Engine, workload: Workload) -> tuple[Endpoint, float | None]:
        """Start (or reuse) the engine; with --llmperf-endpoint, use that server instead."""
        options = ClientOptions(api=workload.api)
        if self.settings.endpoint:
            return Endpoint(self.settings.endpoint, engine.model_name, options), None
        server = self.pool.get(engine)
        return Endpoint(server.base_url, engine.model_name, options), server.start_time_s

    def run(self, nodeid: str, key: str, engine: Engine, workload: Workload,
            repeat: int) -> Result:
        # The same requests and arrival schedule every repeat: only the engine's timing varies.
        # Built first: a bad dataset or config fails before an engine start is paid for.
        requests, warmup = workload.build(self.tokenizer_for(engine))
        endpoint, start_s = self.endpoint_for(engine, workload)
        runs: list[tuple[RunMetrics, Measurement]] = []
        died = None
        for attempt in range(repeat):
            run, died = self._measure_once(engine, endpoint, requests, workload,
                                           warmup if attempt == 0 else ())
            runs.append(run)
            if run[1].client_error or died:
                break  # a client worker or the engine died: what was measured is kept
        result = self._record(nodeid, key, engine, workload, runs, start_s)
        if died:
            self.verdicts[result.test_id] = _death_status(died).summary
            raise died
        return result

    def run_ab(self, nodeid: str, key: str, a: Engine, b: Engine, workload: Workload,
               pairs: int, confirm_pairs: int = 0, gated: tuple[str, ...] = (),
               defer: bool = False) -> tuple[Result, Result]:
        """Engines `a` and `b` measured alternately in ABBA order, one run each per pair, on the
        same requests. When B regressed on a `gated` metric over those pairs, `confirm_pairs` more
        are measured (ab.py says why). With `defer`, they are not measured now: the first pairs
        are kept and `ConfirmLater` is raised, and the test's next call for the same `key` (its
        rerun after the other tests of its engine, confirm_later.py) measures them. Returns
        both sides' results (every run kept, paired by position)."""
        test_id = result_id(nodeid, key)
        sides = {"A": a, "B": b}
        built = {side: spec.tokenizer or spec.model for side, spec in sides.items()}
        workloads = {side: workload.build(self.tokenizer_for(spec))
                     for side, spec in sides.items() if built[side] != built["A"] or side == "A"}
        paused = self.paused_ab.pop(test_id, None)
        if paused is not None and (paused.sides, paused.workload) != (sides, workload):
            paused = None  # the rerun measures something else: start afresh
        runs: dict[str, list[tuple[RunMetrics, Measurement]]] = \
            paused.runs if paused else {"A": [], "B": []}
        starts: dict[str, float | None] = paused.starts if paused else {}
        fit = self._sides_fit(sides)
        # On GPUs with room for both, each side has its own cards: halfway through a round
        # they trade them, so a difference between the cards themselves cancels too (each
        # round for itself: other tests of the engines may have moved them in between).
        trade = fit and self.gpu_count > 0

        def measure_round(first_pair: int, count: int) -> EngineDied | None:
            order = abba_order(first_pair + count)[2 * first_pair:]
            swap_at = count // 2 * 2 if trade and count >= 2 else None
            for index, side in enumerate(order):
                if index == swap_at:
                    self._swap_gpus(nodeid, key, sides)
                spec = sides[side]
                try:
                    endpoint, start_s = self.endpoint_for(spec, workload)
                except EngineError as exc:
                    raise type(exc)(f"A/B side {side} ({spec.label()}): {exc}") from None
                starts.setdefault(side, start_s)
                requests, warmup = workloads.get(side, workloads["A"])
                run, died = self._measure_once(spec, endpoint, requests, workload,
                                               () if runs[side] else warmup)
                runs[side].append(run)
                if run[1].client_error or died:
                    return died
            return None

        with self.pool.room_for(2 if fit else 1):
            died, confirm = None, paused is not None  # a deferred test's rerun: confirm only
            if not confirm:
                died = measure_round(0, pairs)
                complete = len(runs["A"]) == len(runs["B"]) == pairs
                confirm = bool(confirm_pairs and complete and not died
                               and self._side_b_regressed(runs, gated))
                if confirm and defer:
                    self.paused_ab[test_id] = PausedAb(sides, workload, runs, starts)
                    raise ConfirmLater(test_id)
            if confirm:
                later = " after the other tests of its engine," if paused else ""
                self.notes.append(f"{test_id}: B regressed over {pairs} ABBA pairs; "
                                  f"{confirm_pairs} more measured{later} to confirm")
                died = measure_round(pairs, confirm_pairs)
        pairs = min(len(runs["A"]), len(runs["B"]))
        results = tuple(
            self._record(nodeid, f"{key} ({side})", sides[side], workload,
                         runs[side][:max(pairs, 1)], starts.get(side))
            for side in ("A", "B") if runs[side])
        for result in results:  # judge_ab may give side B its verdict; llmperf.ab does not
            side = Status.SIDE_A if result.key.endswith("(A)") else Status.SIDE_B
            self.verdicts.setdefault(result.test_id, side.summary)
        if died:
            for result in results:
                self.verdicts[result.test_id] = _death_status(died).summary
            raise died
        return results

    def _side_b_regressed(self, runs: dict[str, list[tuple[RunMetrics, Measurement]]],
                          gated: tuple[str, ...]) -> bool:
        """Whether B regressed over the pairs measured so far, judged as judge_ab will judge
        them all (checks.SideA): the question that decides whether confirm pairs follow."""
        side_a = checks.SideA(tuple(run.flat() for run, _ in runs["A"]),
                              self.settings.ab_tolerance)
        current = checks.Current.of([run for run, _ in runs["B"]])
        return side_a.compare(current, gated).report.failed

    def _swap_gpus(self, nodeid: str, key: str, sides: dict[str, Engine]) -> None:
        """Stop both sides and start first the one on the back cards: leases hand out the
        first free GPUs, which the other side held. The note says which cards each side
        measured on."""
        before = {side: self.pool.gpus_of(spec) for side, spec in sides.items()}
        behind = self.pool.behind_on_gpus([sides["A"], sides["B"]])
        first = "A" if behind == sides["A"] else "B"
        for spec in sides.values():
            self.pool.stop(spec)
        for side in (first, "A" if first == "B" else "B"):
            try:
                self.pool.get(sides[side])
            except EngineError as exc:
                raise type(exc)(f"A/B side {side} ({sides[side].label()}): {exc}") from None
        after = {side: self.pool.gpus_of(spec) for side, spec in sides.items()}
        shown = "; ".join(f"{side} on GPUs {','.join(before[side])} then "
                          f"{','.join(after[side])}" for side in ("A", "B"))
        self.notes.append(f"{result_id(nodeid, key)}: A/B sides traded GPUs halfway: {shown}")

    def _sides_fit(self, sides: dict[str, Engine]) -> bool:
        """Both A/B engines can run at once: always on the CPU (both pinned to the engine's
        cores), on GPUs when there are enough for both."""
        if self.hardware_class == "cpu":
            return True
        return self.gpu_count >= sum(spec.gpus_needed for spec in sides.values())

    def _measure_once(self, engine: Engine, endpoint: Endpoint, requests, workload: Workload,
                      warmup) -> tuple[tuple[RunMetrics, Measurement], EngineDied | None]:
        measured = measure(endpoint, requests, workload.pattern, seed=workload.seed,
                           warmup=warmup, duration_s=workload.duration_s,
                           workers=self.client_workers(),
                           stall_timeout_s=self.settings.stall_timeout)
        return (compute_metrics(measured.records), measured), \
            self.engine_death(engine, measured.records, measured.stall)

    def _record(self, nodeid: str, key: str, engine: Engine, workload: Workload,
                runs: list[tuple[RunMetrics, Measurement]], start_s: float | None) -> Result:
        """The Result of one engine's runs, added to the session. Its representative run (the
        records and summaries shown) is the median by output throughput."""
        metrics, measured = sorted(runs, key=lambda run: run[0].output_throughput_tok_s)[
            len(runs) // 2]
        if measured.warning and measured.warning not in self.notes:
            self.notes.append(measured.warning)
        result = Result(
            test_id=result_id(nodeid, key), key=key,
            engine=self.engine_identity(engine), engine_label=engine.label(),
            workload=workload.to_dict(), workload_label=workload.label(),
            metrics=metrics, runs=tuple(run[0] for run in runs),
            records=tuple(measured.records), server_metrics=measured.server_metrics,
            fingerprint=dict(self.fingerprint), engine_start_s=start_s,
            client=check_client(metrics, measured.client, workload.pattern),
            client_error=measured.client_error,
        )
        self.results.append(result)
        if result.client_error or result.client.limited:
            self.verdicts[result.test_id] = CLIENT_LIMITED
        if result.failed:  # what went wrong, by kind, whether or not the error rate is allowed
            self.notes.append(f"{result.test_id}: {result.failed} of "
                              f"{result.failed + result.completed} requests failed: "
                              f"{describe_counts(result.failure_kinds())}")
        return result

    def engine_death(self, engine: Engine, records, stall: str | None = None
                     ) -> EngineDied | None:
        """After requests failed, did the engine die? After a stall, it is killed like a dead
        one. (An endpoint's server is not ours to judge or restart: a stall there fails the test,
        nothing more.)"""
        if self.settings.endpoint:
            return EngineStalled(f"the server at {self.settings.endpoint} stalled during the test "
                                 f"({stall}); it is not ours to restart") if stall else None
        if not (stall or any(record.error for record in records)):
            return None
        return self.pool.check(engine, stall=stall)

    def _note_death(self, engine: Engine, line: str, restarted: bool) -> None:
        then = (f"restarted for the next test ({self.pool.deaths[engine]} of {MAX_DEATHS} "
                "deaths)" if restarted else "not started again")
        self.notes.append(f"{line}; {then}")

    def client_workers(self) -> int:
        """--llmperf-client-workers as a number. auto: every core but the engine's, where the
        engine runs on this machine's CPU; every core but two beside a local GPU engine (vLLM's
        API server and its busy-polling engine core each keep one busy); all of them for an
        endpoint elsewhere."""
        chosen = self.settings.client_workers
        if chosen != "auto":
            return chosen
        reserved = 0 if self.settings.endpoint else 1 if self.hardware_class == "cpu" else 2
        return max(1, min(MAX_AUTO_WORKERS, usable_cores() - reserved))

    def engine_identity(self, engine: Engine) -> dict[str, Any]:
        """The spec as baselines record it: paths inside the project relative to its root, so a
        baseline made in one checkout matches the same spec in another (CI clones elsewhere)."""
        identity = engine.to_dict()
        for name in ("model", "tokenizer", "chat_template"):
            value = identity.get(name)
            if isinstance(value, str) and value.startswith("/"):
                try:
                    identity[name] = str(Path(value).relative_to(self.settings.rootdir))
                except ValueError:
                    pass
        return identity

    def run_offline(self, engine: Engine, workload: Workload):
        """Offline mode needs the accelerator to itself: running server engines stop first. It
        runs at normal priority: there is no client to protect from it, only its throughput."""
        from pytest_llmperf.engines.offline import run_offline

        self.pool.stop_all()
        requests, _ = workload.build(self.tokenizer_for(engine))
        return run_offline(engine, requests, self.log_dir())

    def annotate(self, test_id: str, **fields: Any) -> None:
        """Data the run file keeps with a result beyond its metrics (see `annotations`)."""
        self.annotations[test_id].update(fields)

    def record_extra(self, test_id: str, estimates: dict[str, Estimate], detail: str) -> None:
        """Metrics that are not a run (an SLO capacity, offline throughput), for the summary."""
        self.extras.append((test_id, estimates, detail))

    def log_dir(self) -> Path:
        return self.settings.path(self.settings.log_dir)

    # ------------------------------------------------------------------ judging

    def baseline_ref(self, suite_path: Path, nodeid: str, key: str) -> checks.BaselineRef:
        directory = self.settings.path(self.settings.baseline_dir) / self.hardware_class
        return checks.BaselineRef(directory / f"{Path(suite_path).stem}.toml", key, nodeid)

    def judge(self, item, result: Result, options, slo) -> checks.Judgement:
        """A measured run: its SLOs over every metric, its reference over the gated ones (the
        test's `gate=` list, else the baseline's own, else gate.DEFAULT_GATED)."""
        known = _known_metric(result.metrics)
        declared = {"tolerance": options.tolerance, "metrics": options.gate and list(options.gate)}
        self.gates[result.test_id] = {k: v for k, v in declared.items() if v is not None}
        if options.gate:
            try:
                gate.check_names(list(options.gate), known)
            except gate.UnknownMetricError as exc:
                judgement = checks.Judgement(error=f"@pytest.mark.llmperf(gate=...): {exc}")
                self.verdicts[result.test_id] = judgement.label()
                return judgement
        subject = checks.Subject(item, result.test_id, result.key, result.engine, result.workload)
        return self.judge_estimates(subject, checks.Current.of(result.runs), options, slo=slo,
                                    known=known, gated=tuple(options.gate or gate.DEFAULT_GATED),
                                    exact=bool(options.gate))

    def judge_ab(self, result_a: Result, result_b: Result, options, slo) -> checks.Judgement:
        """--llmperf-ab: side B's SLOs, then side B against side A on the paired B/A ratios of
        the gated metrics (the test's `gate=` list, else gate.DEFAULT_GATED) under
        --llmperf-ab-tolerance."""
        side_a = checks.SideA(tuple(run.flat() for run in result_a.runs),
                              self.settings.ab_tolerance, self.settings.ab_pairs)
        judgement = checks.judge(checks.Current.of(result_b.runs), side_a,
                                 gated=options.gate or gate.DEFAULT_GATED, slo=slo,
                                 known=_known_metric(result_b.metrics))
        self.annotate(result_b.test_id, ab=judgement.ab)
        if self.verdicts.get(result_b.test_id) != CLIENT_LIMITED:
            self.verdicts[result_b.test_id] = judgement.label()
        self.notes.append(f"{result_b.test_id}: {ab_line(judgement.ab)}")
        self.notes += [f"{result_b.test_id}: {verdict.message}"
                       for verdict in judgement.report.verdicts if verdict.status != Status.PASS]
        return judgement

    def judge_estimates(self, subject: checks.Subject, current: checks.Current, options, *, slo,
                        known, gated: tuple[str, ...], exact: bool = True) -> checks.Judgement:
        """Any named metrics (a run's, an SLO capacity, an offline throughput) through the SLO
        check and then this session's reference (reference_for), or into a pending baseline
        update. `exact`: gate exactly `gated`, whatever else an existing baseline holds."""
        ref = self.baseline_ref(subject.item.path, user_nodeid(subject.item), subject.key)
        reference = None if self.settings.update_baselines else self.reference_for(
            subject, ref, exact)
        judgement = checks.judge(current, reference, gated=gated, tolerance=options.tolerance,
                                 slo=slo, known=known)
        limited = self.verdicts.get(subject.test_id) == CLIENT_LIMITED
        if self.settings.update_baselines:
            if limited:
                self.notes.append(f"{subject.test_id}: baseline not updated (client-limited run)")
            elif not judgement.failed:
                self.pending[subject.item.nodeid].append(PendingUpdate(
                    ref, checks.updated_entries(dict(current.estimates), ref, options.tolerance,
                                                gated, exact=exact),
                    baselines.make_provenance(self.fingerprint, subject.engine, subject.workload,
                                              commit=git_commit(self.settings.rootdir))))
        elif judgement.record_local and not limited and not judgement.failed:
            local = self.local_ref(ref)
            self.pending[subject.item.nodeid].append(PendingUpdate(
                local, checks.updated_entries(dict(current.estimates), local, options.tolerance,
                                              gated, exact=exact),
                baselines.make_provenance(self.fingerprint, subject.engine, subject.workload,
                                          commit=git_commit(self.settings.rootdir)),
                local=True))
        self.verdicts[subject.test_id] = CLIENT_LIMITED if limited else judgement.label()
        self.notes += [f"{subject.test_id}: {note}" for note in judgement.notes]
        return judgement

    def reference_for(self, subject: checks.Subject, ref: checks.BaselineRef,
                      exact: bool) -> checks.Reference:
        """What this session judges a measurement against: --llmperf-compare's saved run, else
        the suite's baseline table. In an A/B session only llmperf.run is paired; a sweep,
        capacity or offline run measured side A only."""
        if self.settings.ab:
            return checks.NotJudged("measured on side A only; --llmperf-ab judges llmperf.run")
        if self.settings.compare:
            return self._saved_reference(subject.key)
        return checks.BaselineTable(ref, subject.engine, self.fingerprint,
                                    require=self.settings.require_baseline, exact=exact,
                                    local=self.local_ref(ref))

    def local_ref(self, ref: checks.BaselineRef) -> checks.BaselineRef:
        """The machine-local stand-in for a committed baseline table: the same file name and
        key under .llmperf/baselines/<machine>/<hardware class>/."""
        directory = (self.settings.path(LOCAL_BASELINES_DIR)
                     / baselines.machine_id(self.fingerprint) / self.hardware_class)
        return checks.BaselineRef(directory / ref.path.name, ref.key, ref.nodeid)

    def _saved_reference(self, key: str) -> checks.Reference:
        """The --llmperf-compare run's test `key`; read once per session."""
        try:
            if self._saved_run is None:
                path = runfile.resolve_saved(self.settings.compare, self.runs_dir())
                self._saved_run = (path, runfile.read_run(path))
        except baselines.BaselineError as exc:
            return checks.Unusable(str(exc))
        path, saved = self._saved_run
        return checks.SavedRun(Path(os.path.relpath(path)), key, saved.results.get(key))

    def apply_updates(self, nodeid: str, passed: bool) -> list[str]:
        """Write a test's pending baseline updates once the test as a whole has passed. Returns
        the updates that could not be written (one line each: file, key, fix); the measurements
        stay in the summary and the run file either way."""
        errors = []
        for update in self.pending.pop(nodeid, []):
            nodeid = update.ref.nodeid  # as the user types it
            if not passed:
                self.notes.append(f"{nodeid}: baseline not updated (the test failed)")
                continue
            update.ref.path.parent.mkdir(parents=True, exist_ok=True)
            try:
                baselines.update_baseline(update.ref.path, update.ref.key, update.entries,
                                          update.provenance)
            except baselines.BaselineError as exc:
                errors.append(f"baseline not updated: {exc}")
                self.verdicts[result_id(nodeid, update.ref.key)] = Status.ERROR.summary
                continue
            where = f'{update.ref.shown} :: "{update.ref.key}"'
            if update.local:  # the verdict stays: nothing was gated yet
                self.notes.append(f"{nodeid}: this machine's first-run baseline recorded: "
                                  f"{where}; the next run here gates against it")
                continue
            self.notes.append(f"{nodeid}: baseline updated: {where}")
            self.verdicts[result_id(nodeid, update.ref.key)] = Status.UPDATED.summary
        return errors

    # ------------------------------------------------------------------ output

    def runs_dir(self) -> Path:
        return self.settings.path(RUNS_DIR)


def _death_status(died: EngineDied) -> Status:
    return Status.ENGINE_STALLED if isinstance(died, EngineStalled) else Status.ENGINE_DIED


def _known_metric(metrics: RunMetrics):
    def known(name: str) -> bool:
        try:
            metrics.get(name)
        except KeyError:
            return False
        return True

    return known


def git_commit(directory: Path) -> str | None:
    """The checkout's commit (with "-dirty" when it has changes), for provenance."""
    try:
        sha = subprocess.run(["git", "rev-parse", "HEAD"], cwd=directory, capture_output=True,
                             text=True, timeout=GIT_TIMEOUT_S)
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"],
                               cwd=directory, capture_output=True, text=True,
                               timeout=GIT_TIMEOUT_S)
    except (OSError, subprocess.TimeoutExpired):
        return None
    if sha.returncode != 0:
        return None
    return sha.stdout.strip() + ("-dirty" if dirty.stdout.strip() else "")
