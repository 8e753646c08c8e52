"""Rollout cost of GRPO, DAPO and Pilot-Commit predicted from per-prompt pass rates.

``pass_rates`` is a 1-D array with one entry per prompt (or samples from a pass-rate distribution);
every round draws its prompts uniformly from it and every rollout succeeds with its prompt's rate.
Three ways to get the numbers, each returning a :class:`Prediction`:

* :func:`predict` — analytic. Pass counts per round are Binomial(G, mean pass probability). GRPO is
  closed form; DAPO is an exact recursion over rounds; Pilot-Commit is a Markov chain over the
  buffer size at the start of a step, with the rounds inside a step computed exactly and its
  stationary distribution averaged over. The one approximation is the staleness flush: surplus
  entries that outlive a one-round step are thinned by the share a ``random`` prompt sampler would
  leave older than ``buffer_max_off_steps`` (exact for 0, and it never binds when supply < demand).
* :func:`predict_at_filter_rate` — the analytic model at a given share of candidates passing the filter
  (e.g. a run's logged one), which is all the rounds depend on: it separates a wrong pass-rate input
  from the model's own error.
* :func:`simulate` — Monte Carlo that drives the trainer's own step loop (``recipe.pc.step.StepLoop``: its allocator
  and prompt filter) with Bernoulli rollouts and a shuffled dataloader over the prompts, to check the analytic
  numbers (``recipe.pc_tools.simulate``). It also takes :class:`Registered`: any registered allocator, with its
  settings composed from ``key=value`` overrides of the trainer YAML (:func:`compose_settings`).

Of the allocator stages they model screening pilots (``screen_n``) and PODS down-sampling (``downsample_n``); GRESO
skipping (``simulate(..., skip=SKIP)``) only the simulator, as it acts on each prompt's history. With fixed pass
rates a prompt never solved stays unsolved, so its skips are never wrong, and nothing is evicted: the simulated
saving from skipping is optimistic for a policy that learns. All three leave out what a fixed pass-rate table cannot
describe: the policy improving, eviction of solved prompts, and epoch-end effects. A step cut at
``max_num_gen_batches`` rounds trains on what it collected (the trainer does so once it has ``min_train_prompts``).
Unset fields of a configuration take the trainer YAML's values (``recipe.pc_tools.defaults``): the band, staleness
bound and round limit.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
from omegaconf import OmegaConf

from recipe.pc.settings import PCConfigError, PCSettings, yaml_defaults
from recipe.pc.stages.skip import SkipSettings
from recipe.pc_tools.defaults import MAX_OFF_STEPS, MAX_ROUNDS, P_LOWER, P_UPPER

# Expected rounds per step above which a step is reported as never filling (inf).
_MAX_EXPECTED_ROUNDS = 2000
_TAIL_MASS = 1e-12


def _generated_label(n: int, downsample_n: int | None) -> str:
    return f"n={n}" if downsample_n is None else f"n={n} of {downsample_n}"


@dataclass(frozen=True)
class GRPO:
    """One round of ``train_batch_size`` prompts x ``n`` rollouts per step, every group trained; with
    ``downsample_n`` (PODS) each group generates that many and trains the ``n`` with the most spread."""

    n: int
    train_batch_size: int
    downsample_n: int | None = None

    @property
    def label(self) -> str:
        return f"GRPO {_generated_label(self.n, self.downsample_n)}"


@dataclass(frozen=True)
class DAPO:
    """Rounds of ``gen_batch_size`` prompts x ``n``; groups with spread kept until ``train_batch_size``."""

    n: int
    gen_batch_size: int
    train_batch_size: int
    max_num_gen_batches: int = MAX_ROUNDS  # <= 0: unlimited
    downsample_n: int | None = None  # PODS: generated per group, the n with the most spread kept

    @property
    def label(self) -> str:
        return f"DAPO {_generated_label(self.n, self.downsample_n)} G={self.gen_batch_size}"


@dataclass(frozen=True)
class PilotCommit:
    """``n_pilot`` pilots on ``gen_batch_size`` prompts a round, ``n_commit`` more on buffered prompts."""

    n_pilot: int
    n_commit: int
    gen_batch_size: int
    train_batch_size: int
    p_lower: float = P_LOWER
    p_upper: float = P_UPPER
    buffer_max_off_steps: int = MAX_OFF_STEPS
    max_num_gen_batches: int = MAX_ROUNDS  # <= 0: unlimited
    screen_n: int | None = None  # screening: this many pilot rollouts first, the rest only if they disagree
    downsample_n: int | None = None  # PODS: generated per commit, the n_commit with the most spread kept

    @property
    def label(self) -> str:
        extra = "" if self.screen_n is None else f" screen {self.screen_n}"
        commit = self.n_commit if self.downsample_n is None else f"{self.n_commit} of {self.downsample_n}"
        return f"PC {self.n_pilot}+{commit} G={self.gen_batch_size}{extra}"


@dataclass(frozen=True)
class Registered:
    """Any registered allocator: ``overrides`` (``key=value``, ``algorithm.rollout_allocation=NAME`` among them) of the
    trainer YAML's defaults. There is no analytic model of it: it is simulated (:func:`simulate`)."""

    overrides: tuple[str, ...]
    label: str


Config = GRPO | DAPO | PilotCommit | Registered


@dataclass(frozen=True)
class Prediction:
    """Expected per-step costs of one configuration (steady state)."""

    label: str
    group_size: int  # rollouts in one trained group
    rounds_per_step: float
    pilot_rollouts_per_step: float  # PC pilots; 0 for GRPO/DAPO
    commit_rollouts_per_step: float  # PC commits, or every GRPO/DAPO rollout
    trained_groups_per_step: float
    informative_groups_per_step: float  # trained groups whose metric is not constant
    filter_pass_rate: float  # PC: pilots in the band; DAPO: groups kept; GRPO: groups with spread

    @property
    def rollouts_per_step(self) -> float:
        return self.pilot_rollouts_per_step + self.commit_rollouts_per_step

    @property
    def rollouts_per_informative_group(self) -> float:
        if self.informative_groups_per_step <= 0:
            return math.inf
        return self.rollouts_per_step / self.informative_groups_per_step

    @property
    def informative_groups_per_1000_rollouts(self) -> float:
        """Trained groups whose metric varies (each gives GRPO a non-zero gradient) per 1,000 generated rollouts."""
        if self.rollouts_per_step <= 0 or not math.isfinite(self.rollouts_per_step):
            return 0.0
        return 1000.0 * self.informative_groups_per_step / self.rollouts_per_step


# ---------------------------------------------------------------------- binomial arithmetic
def binomial_pmf(n: int, p: np.ndarray | float) -> np.ndarray:
    """Binomial(n, p) probabilities of k = 0..n, one row per entry of ``p`` (last axis is k)."""
    p = np.asarray(p, dtype=np.float64)[..., None]
    k = np.arange(n + 1)
    log_fact = np.concatenate([[0.0], np.cumsum(np.log(np.arange(1, n + 1)))])
    log_comb = log_fact[n] - log_fact - log_fact[::-1]
    with np.errstate(divide="ignore", invalid="ignore"):
        log_pmf = log_comb + np.where(k > 0, k * np.log(p), 0.0) + np.where(k < n, (n - k) * np.log1p(-p), 0.0)
    return np.exp(log_pmf)


def _in_band(n: int, p_lower: float, p_upper: float) -> np.ndarray:
    """For k = 0..n successes of ``n``: does the pilot pass ``classify_pilot`` (mean k/n in [p_lower, 1 - p_upper]
    with the trainer's tolerance, and 0 < k < n: no spread never passes), as 0/1 floats."""
    k = np.arange(n + 1)
    return ((k / n >= p_lower - 1e-9) & (k / n <= 1.0 - p_upper + 1e-9) & (k > 0) & (k < n)).astype(np.float64)


def band_pass_prob(pass_rates, n: int, p_lower: float, p_upper: float) -> np.ndarray:
    """P(a pilot of ``n`` rollouts passes ``classify_pilot``), one entry per pass rate."""
    return binomial_pmf(n, pass_rates) @ _in_band(n, p_lower, p_upper)


def screened_pilot_probs(pass_rates, n: int, screen_n: int, p_lower: float, p_upper: float):
    """With a screen of ``screen_n`` of the ``n`` pilot rollouts: (P(the screen disagrees, so the rest of the pilot
    is generated), P(it disagrees and the whole pilot then passes ``classify_pilot``)), one entry per pass rate."""
    in_band = _in_band(n, p_lower, p_upper)
    screen, rest = binomial_pmf(screen_n, pass_rates), binomial_pmf(n - screen_n, pass_rates)
    mixed = screen[..., 1:screen_n].sum(axis=-1)
    passed = sum(screen[..., j] * (rest @ in_band[j : j + n - screen_n + 1]) for j in range(1, screen_n))
    return mixed, passed


def nonzero_variance_prob(pass_rates, n: int) -> np.ndarray:
    """P(a group of ``n`` rollouts is not all-correct or all-wrong) = 1 - p^n - (1-p)^n."""
    p = np.asarray(pass_rates, dtype=np.float64)
    return 1.0 - p**n - (1.0 - p) ** n


def _check(pass_rates, config: Config) -> np.ndarray:
    p = np.asarray(pass_rates, dtype=np.float64)
    if p.ndim != 1 or p.size == 0:
        raise ValueError(f"pass_rates must be a non-empty 1-D array, got shape {p.shape}")
    bad = np.flatnonzero(~((p >= 0) & (p <= 1)))  # also catches NaN
    if bad.size:
        raise ValueError(f"pass_rates[{bad[0]}]={p[bad[0]]} is not a probability in [0, 1] ({bad.size} bad in all)")
    _settings(config)  # the trainer's own checks, with its key names
    return p


# Pass rates here never change: nothing is evicted. GRESO skipping is simulated only (``simulate(..., skip=...)``).
SIMULATION_DEFAULTS = {"data.seed": 0, "algorithm.exclude_threshold_upper": None, "algorithm.skip.enable": False}


def _parse_override(text: str) -> tuple[str, object]:
    key, equals, value = text.partition("=")
    if not (equals and key.strip()):
        raise PCConfigError(f"expected an override KEY=VALUE (e.g. data.gen_batch_size=64), got {text!r}")
    key = key.strip()
    return key, OmegaConf.select(OmegaConf.from_dotlist([f"{key}={value}"]), key)  # YAML values: 8, 0.5, null


def _config_keys(node, prefix: str = "") -> set[str]:
    keys = set()
    for name, value in node.items_ex(resolve=False):
        keys.add(prefix + str(name))
        if OmegaConf.is_dict(value):
            keys |= _config_keys(value, f"{prefix}{name}.")
    return keys


def compose_settings(overrides: Mapping[str, object] | Sequence[str]) -> PCSettings:
    """The trainer's settings from the YAML's defaults and ``overrides`` (values, or ``key=value`` strings), read and
    checked as the trainer reads them: any registered allocator, its error messages naming the keys. Nothing is
    evicted or skipped unless an override says so. A key neither the YAML nor the settings have is refused."""
    if not isinstance(overrides, Mapping):
        overrides = dict(_parse_override(text) for text in overrides)
    cfg = yaml_defaults()
    known = _config_keys(cfg) | set(PCSettings.keys())
    for key, value in {**SIMULATION_DEFAULTS, **overrides}.items():
        if key not in known:
            raise PCConfigError(f"{key} is not a key of the trainer's config (recipe/pc/config/pc_trainer.yaml)")
        OmegaConf.update(cfg, key, value, force_add=True)
    return PCSettings.from_config(cfg)


# GRESO skipping is not modelled analytically: it acts on a prompt's history, which a pass-rate table has not got.
# Screening and down-sampling are (the configurations' screen_n and downsample_n).
def _settings(config: Config) -> PCSettings:
    """The trainer's settings for ``config``: the YAML's defaults with the configuration's values, read and checked
    as the trainer reads them (its error messages name the keys). No eviction: pass rates here never change."""
    if isinstance(config, Registered):
        return compose_settings(config.overrides)
    if isinstance(config, GRPO):
        method, gen, n_pilot, rounds = "grpo", config.train_batch_size, 1, MAX_ROUNDS
        band = {}
    elif isinstance(config, DAPO):
        method, gen, n_pilot, rounds = "dapo", config.gen_batch_size, 1, config.max_num_gen_batches
        band = {}
    elif isinstance(config, PilotCommit):
        method, gen, n_pilot, rounds = "pilot_commit", config.gen_batch_size, config.n_pilot, config.max_num_gen_batches
        band = {
            "algorithm.diversity_threshold_lower": config.p_lower,
            "algorithm.diversity_threshold_upper": config.p_upper,
            "algorithm.buffer_max_off_steps": config.buffer_max_off_steps,
            "algorithm.exploration.screen_n": config.screen_n,
        }
    else:
        raise TypeError(f"unknown configuration {config!r}; use GRPO, DAPO, PilotCommit or Registered")
    return compose_settings(
        {
            "algorithm.rollout_allocation": method,
            "data.train_batch_size": config.train_batch_size,
            "data.gen_batch_size": gen,
            "actor_rollout_ref.rollout.n": config.n_commit if isinstance(config, PilotCommit) else config.n,
            "algorithm.exploration.n": n_pilot,
            "algorithm.max_num_gen_batches": rounds,
            "algorithm.downsample.n": config.downsample_n,
            **band,
        }
    )


# ---------------------------------------------------------------------- analytic model
def predict(pass_rates, config: Config) -> Prediction:
    """Analytic steady-state prediction for ``config`` on prompts with these pass rates."""
    p = _check(pass_rates, config)
    if isinstance(config, Registered):
        raise TypeError(f"{config.label}: the analytic model knows GRPO, DAPO and Pilot-Commit alone; simulate it")
    if isinstance(config, GRPO):
        # Down-sampling keeps the most varied n of the generated, so a group has spread iff the generated had.
        generated = config.downsample_n or config.n
        spread = 0.0 if config.n == 1 else float(nonzero_variance_prob(p, generated).mean())
        B = config.train_batch_size
        return Prediction(config.label, config.n, 1.0, 0.0, float(B * generated), float(B), B * spread, spread)
    if isinstance(config, DAPO):
        # classify_by_spread keeps single-rollout groups.
        generated = config.downsample_n or config.n
        return _predict_dapo(1.0 if generated == 1 else float(nonzero_variance_prob(p, generated).mean()), config)
    if config.screen_n is None:
        band = float(band_pass_prob(p, config.n_pilot, config.p_lower, config.p_upper).mean())
        return _predict_pc(band, config)
    mixed, passed = screened_pilot_probs(p, config.n_pilot, config.screen_n, config.p_lower, config.p_upper)
    return _predict_pc(float(passed.mean()), config, screen_mixed=float(mixed.mean()))


def predict_at_filter_rate(rate: float, config: DAPO | PilotCommit, screen_mixed: float | None = None) -> Prediction:
    """The prediction for ``config`` when a share ``rate`` of filtered candidates passes (DAPO: groups with
    spread; PC: pilots in the band), e.g. a run's logged ``filtering_stats/pass_rate``.

    Rounds and rollouts depend on the pass rates only through this share (and, with screening, the share of
    screens that disagree, ``screen_mixed``), so comparing a run with this splits a miss of :func:`predict`
    into the pass-rate input and the model's own arithmetic.
    """
    if not isinstance(config, DAPO | PilotCommit):
        raise TypeError(f"{config!r} filters nothing; predict_at_filter_rate takes DAPO or PilotCommit")
    screened = isinstance(config, PilotCommit) and config.screen_n is not None
    if screened != (screen_mixed is not None):
        raise ValueError(
            "screen_mixed (the share of screens that disagree) is needed with screening, and only then; "
            f"got screen_mixed={screen_mixed} for {config.label}"
        )
    for name, value in (("filter pass rate", rate), ("screen_mixed", 0.0 if screen_mixed is None else screen_mixed)):
        if not 0.0 <= value <= 1.0:
            raise ValueError(f"{name} {value} is not a probability in [0, 1]")
    _settings(config)
    if isinstance(config, DAPO):
        return _predict_dapo(rate, config)
    return _predict_pc(rate, config, screen_mixed=screen_mixed)


def _predict_dapo(keep: float, config: DAPO) -> Prediction:
    pmf = binomial_pmf(config.gen_batch_size, keep)
    rounds, shortfall, _ = _fill(pmf, np.array([config.train_batch_size]), config.max_num_gen_batches)
    trained = config.train_batch_size - shortfall[0]
    informative = 0.0 if config.n == 1 else trained
    rollouts = rounds[0] * config.gen_batch_size * (config.downsample_n or config.n)
    return Prediction(config.label, config.n, rounds[0], 0.0, rollouts, trained, informative, keep)


def _fill(pmf: np.ndarray, needs: np.ndarray, max_rounds: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Rounds until the passes of successive rounds (each ~ ``pmf``) cover ``need``, for each start need.

    Returns, per start need: expected rounds, expected shortfall when cut at ``max_rounds`` (<= 0:
    never cut), and the distribution of the surplus (passes beyond need in the last round; 0 if cut).
    """
    size = len(pmf) - 1
    top = int(needs.max())
    mean = float(pmf @ np.arange(size + 1))
    if max_rounds <= 0 and (mean == 0.0 or top / mean > _MAX_EXPECTED_ROUNDS):
        inf = np.full(len(needs), np.inf)
        return inf, np.zeros(len(needs)), np.zeros((len(needs), size + 1))
    padded = np.concatenate([pmf, np.zeros(top + 1)])
    need = np.arange(top + 1)
    surplus_kernel = padded[need[:, None] + np.arange(size + 1)[None, :]]  # [need, y] = P(passes = need + y)
    gap = need[:, None] - need[None, :]  # [need, need'] = passes that leave need' still open
    carry_kernel = np.where((gap >= 0) & (need[None, :] > 0), padded[np.clip(gap, 0, size + top)], 0.0)
    open_mass = np.zeros((len(needs), top + 1))
    open_mass[np.arange(len(needs)), needs] = 1.0
    rounds = np.zeros(len(needs))
    surplus = np.zeros((len(needs), size + 1))
    r = 0
    while True:
        r += 1
        done = open_mass @ surplus_kernel
        surplus += done
        rounds += r * done.sum(axis=1)
        open_mass = open_mass @ carry_kernel
        if (max_rounds > 0 and r >= max_rounds) or open_mass.sum() < _TAIL_MASS:
            break
    rounds += r * open_mass.sum(axis=1)
    surplus[:, 0] += open_mass.sum(axis=1)
    return rounds, open_mass @ need, surplus


def _predict_pc(band: float, config: PilotCommit, screen_mixed: float | None = None) -> Prediction:
    """``band``: the probability that a new prompt's pilot lands in the band (the mean over the prompts drawn).

    With screening a passing pilot enters the buffer a round later, when the rest of it is generated; in the
    steady state every round still adds the passes of one round of new prompts, so only the pilot's cost changes:
    ``screen_n`` rollouts a new prompt, plus the rest for the ``screen_mixed`` share whose screen disagreed.
    """
    B, G, s = config.train_batch_size, config.gen_batch_size, config.buffer_max_off_steps
    pmf = binomial_pmf(G, band)
    group = config.n_pilot + config.n_commit
    M = config.max_num_gen_batches
    # Chain state b = buffer size at the start of a step. b < B: round 1 commits all b, and each later
    # round commits what the previous round's pilots put in; so rounds = 1 + rounds of passes to
    # cover B - b (the round limit leaves M - 1 of them), and the leftover is surplus + the last pilots.
    starts = B - np.arange(B)
    fill_rounds, shortfall, surplus = _fill(pmf, starts, M - 1 if M > 0 else 0)
    if not np.isfinite(fill_rounds).all():
        return Prediction(config.label, group, math.inf, math.inf, 0.0, 0.0, 0.0, band)
    cap = B + (s + 2) * G
    T = np.zeros((cap + 1, cap + 1))
    for b in range(B):
        _add_row(T, b, _convolve(surplus[b], pmf))
    rounds = np.concatenate([1.0 + fill_rounds, np.ones(cap + 1 - B)])
    trained = np.concatenate([B - shortfall, np.full(cap + 1 - B, float(B))])
    for b in range(B, cap + 1):
        # One round; the b - B uncommitted older entries are thinned by the share a random sampler
        # leaves past the staleness bound: with per-step survival q, ages in the buffer go as q^(age-1).
        q = 1.0 - B / b if b else 0.0
        flushed = q**s / sum(q**j for j in range(s + 1))
        _add_row(T, b, _convolve(binomial_pmf(b - B, 1.0 - flushed), pmf))
    pi = _stationary(T)
    rounds_per_step = float(pi @ rounds)
    trained_per_step = float(pi @ trained)
    if config.screen_n is None:
        pilot_per_prompt = float(config.n_pilot)
    else:
        pilot_per_prompt = config.screen_n + screen_mixed * (config.n_pilot - config.screen_n)
    return Prediction(
        config.label,
        group,
        rounds_per_step,
        rounds_per_step * G * pilot_per_prompt,
        trained_per_step * (config.downsample_n or config.n_commit),
        trained_per_step,
        trained_per_step,  # the pilot half already has spread
        band,
    )


def _add_row(T: np.ndarray, b: int, dist: np.ndarray) -> None:
    """Put ``dist`` (over next buffer sizes 0..) in row ``b``, folding mass past the cap into the cap."""
    cap = T.shape[0] - 1
    head = dist[: cap + 1]
    T[b, : len(head)] = head
    T[b, cap] += dist[cap + 1 :].sum()


def _convolve(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Distribution of the sum of two independent counts, skipping the negligible tails of each."""
    lo_a, lo_b = _support(a), _support(b)
    out = np.zeros(len(a) + len(b) - 1)
    part = np.convolve(a[lo_a[0] : lo_a[1]], b[lo_b[0] : lo_b[1]])
    out[lo_a[0] + lo_b[0] : lo_a[0] + lo_b[0] + len(part)] = part
    return out


def _support(dist: np.ndarray, eps: float = 1e-16) -> tuple[int, int]:
    idx = np.flatnonzero(dist > eps)
    return (0, 1) if idx.size == 0 else (int(idx[0]), int(idx[-1]) + 1)


def _stationary(T: np.ndarray, tol: float = 1e-12, max_iter: int = 20000) -> np.ndarray:
    pi = np.zeros(T.shape[0])
    pi[0] = 1.0  # the first step starts with an empty buffer
    for _ in range(max_iter):
        nxt = pi @ T
        nxt /= nxt.sum()
        if np.abs(nxt - pi).sum() < tol:
            return nxt
        pi = nxt
    return pi


# ---------------------------------------------------------------------- Monte-Carlo simulator
def simulate(
    pass_rates,
    config: Config,
    steps: int = 400,
    warmup: int = 20,
    seed: int = 0,
    skip: SkipSettings | None = None,
    runs: int = 1,
    prompts: int | None = None,
) -> Prediction:
    """Mean per-step costs over ``steps`` simulated steps after ``warmup``, driving the trainer's own allocator and
    prompt filter with Bernoulli rollouts (``recipe.pc_tools.simulate``).

    ``skip``: with GRESO skipping (``algorithm.skip.*``), its history fed the groups the allocator reports (PC:
    pilots and screens that agreed; GRPO/DAPO: every generated group); it draws from a generator of its own, so a
    run with and without skipping see the same rollouts until a prompt is first skipped. ``runs``: that many
    independent runs (seeds ``seed``, ``seed + 1``, ...) pooled, e.g. to average the first steps of a run
    (``warmup=0``) over many. ``prompts``: each run draws that many prompts, with replacement, from ``pass_rates``
    (a run's prompt count sets how often a prompt comes back, which skipping acts on).

    A step cut at ``max_num_gen_batches`` rounds trains what it has if that is at least ``min_train_prompts`` (as
    the trainer's); a step still open after 10000 rounds raises: the data cannot fill it.
    """
    rates = _check(pass_rates, config)
    if steps < 1 or warmup < 0 or runs < 1 or (prompts is not None and prompts < 1):
        raise ValueError(f"steps={steps}, runs={runs} and prompts={prompts} must be >= 1 and warmup={warmup} >= 0")
    settings = _settings(config)
    # Imported here: the simulator drives the trainer's allocators (torch, verl), which predict() never needs.
    from recipe.pc_tools.simulate import simulate_totals

    r, pilot, commit, trained, informative, passes, candidates = simulate_totals(
        settings, rates, steps, warmup, seed, skip, runs, prompts
    )
    rate = float(passes / candidates) if candidates else 0.0
    label = config.label + ("" if skip is None else " skip")
    return Prediction(label, settings.group_size, r, pilot, commit, trained, informative, rate)
