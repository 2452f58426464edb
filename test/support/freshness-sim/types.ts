// The simulator's inputs and outputs: the population's rate classes, the options of a run, the
// policies it compares and the figures it returns (sim.ts runs them).

export interface RateClass {
  label: string;
  share: number;
  /** True changes per day; 0 = never. */
  ratePerDay: number;
}

export interface SimOptions {
  subscribers: number;
  classes: readonly RateClass[];
  /** Syncs a day the refresh may spend. */
  budgetPerDay: number;
  days: number;
  /** Days before figures are taken (learning). */
  warmupDays: number;
  maxAgeDays: number;
  auditShare: number;
  /**
   * The audit's draws made on top of the budget rather than out of it: not a policy, a measure of
   * what the audit costs (bench:freshness-family `--audit-on-top`). Default false.
   */
  auditOnTop?: boolean;
  /** The plan's own syncs not held to what it expected of them (`auditAction`'s `plansSyncs`): the code before them, for comparison. */
  plansSyncsIgnored?: boolean;
  seed: number;
  /** Simulated seconds between two ticks of the scheduler. Default 60. */
  tickSeconds?: number;
  /** Simulated seconds between two plans (production: 10 min, or a fifth of the max age). Default 3600. */
  replanSeconds?: number;
  /** Simulated seconds between two snapshots of the estimate and the truth. Default 3600. */
  snapshotSeconds?: number;
  priorWeight?: number;
  /** false: the single-rate prior only (the estimator before the mixture), for comparison. */
  mixture?: boolean;
  /**
   * The cards' createDates. `random`: years old, unrelated to change (today's sandbox,
   * the control). `from-changes`: a change that adds a card (3 in 8) stamps it with the change's
   * time, and a wallet's first cards carry dates drawn from the same process before the start.
   * `predating`: the cards held at the start are 2 to 6 years old whatever the wallet does; a card
   * added later is stamped as in `from-changes`.
   */
  createdDates?: 'random' | 'from-changes' | 'predating';
  /**
   * Wallets of `minCards` to `maxCards` cards whose changes are of stated kinds, as the sandbox's
   * `--change-kinds` (src/mock-api/wallets.ts): only an addition brings a new createDate (and, with
   * `from-changes`, the history before the start is the wallet's additions at rate × `kinds.add`).
   * Absent: one card's date, a change adding a card with 3 in 8.
   */
  wallets?: { minCards: number; maxCards: number; kinds: { add: number; remove: number; replace: number } };
  /**
   * At `atDays`, this share of the subscribers (exactly, drawn by the seed) become known to the
   * service, never synced, and an operator's enqueue puts them ahead of the refresh; before, they
   * are neither synced nor counted.
   */
  intake?: { share: number; atDays: number };
  /** false: the policy ignores the answers' evidence (one prior for everyone), for comparison. */
  evidence?: boolean;
  /** τ of forgetting in max ages; 0: never forget. Default the product's (FORGET_MAX_AGES). */
  forgetMaxAges?: number;
  /** The estimator's change-point hazard (src/freshness/change-point.ts); absent: the product's. */
  changePointHazard?: number;
  /** Plan due times from a rate drawn from each posterior (Thompson sampling), seeded. */
  explore?: boolean;
  /** Where the three windows of {@link SimResult.windows} start, days. Default 0 (thirds of the run). */
  windowsFromDays?: number;
  /**
   * The continuous policy with the world's true mixture of rates as its prior: the class learner
   * (plan.ts), a bound between the continuous policy and the oracle. `classes`: one
   * mixture for everyone (no createDate evidence); `by-evidence`: besides, each evidence group's
   * true mixture, as the continuous policy fits one per group.
   */
  classPrior?: 'classes' | 'by-evidence';
  /** At `atDays`, this share of the wallets that never changed start changing at `ratePerDay`. */
  wakeUp?: { share: number; ratePerDay: number; atDays: number };
  /**
   * At `atDays` an operator restarts the workers with another budget and max age (each multiplied
   * by its factor), and the cadences that follow from the max age: the refresh plans at once by
   * the new ones. Round robin spends the new budget too.
   */
  retune?: Retune;
  /** At `atDays` every wallet changes at once (every token reissued), whatever its rate. */
  massChange?: { atDays: number };
  /**
   * Production subscribers each simulated one stands for (a fleet simulated smaller than it is):
   * each audit draw looks at that many copies (the one it syncs, and others drawn at random, whose
   * staleness it reads without syncing them), as production's share of the larger budget draws that
   * many, each independent of the others.
   */
  auditWeight?: number;
}

/** {@link SimOptions.retune}: the new budget and max age as factors, and the cadences at the new max age. */
interface Retune {
  atDays: number;
  budgetFactor: number;
  maxAgeFactor: number;
  replanSeconds?: number;
  workerPlanSeconds?: number;
}

/** A window of the run and its time-averaged stale share (hourly snapshots). */
interface WindowShare {
  fromDays: number;
  toDays: number;
  staleShare: number;
  /** The continuous policy's mean estimate of the stale share in the window (its snapshots after the warm-up). */
  estimate?: number;
}

export type PolicyName = 'nightly-id-order' | 'round-robin' | 'continuous' | 'oracle' | 'nightly-by-estimate';

/** The policies bench/freshness.ts compares: the simulator's, and the class learner (plan.ts `runAs`). */
export type BenchPolicy = PolicyName | 'class-learner' | 'class-learner-evidence';

export interface SimResult {
  policy: BenchPolicy;
  /** Time-averaged share of subscribers whose copy differs from upstream (after warm-up). */
  staleShare: number;
  /** Mean age of stale copies, days (hourly snapshots after warm-up). */
  meanStaleAgeDays: number;
  /** Longest time any subscriber went without a sync, days. */
  maxAgeDays: number;
  syncs: number;
  /** Mean |estimate − truth| in share points, and the mean truth, for the continuous policy. */
  estimateError?: { meanAbs: number; meanTruth: number; meanEstimate: number };
  /** The audit's last 95% interval and the truth at the end. */
  audit?: {
    samples: number;
    ratio: number;
    low: number;
    high: number;
    truthAtEnd: number;
    estimateAtEnd: number;
  };
  keepsMaxAge?: boolean;
  /** The run from `windowsFromDays` in thirds: learning, middle, end. */
  windows: WindowShare[];
  /** Plans of the continuous policy that went round in turn because the audit disagreed with the estimate. */
  plansActingOnAudit?: number;
  /** With `wakeUp`: the woken wallets' stale share by max age after waking, and the always-busy wallets' at the same rate. */
  wakeUp?: { woken: number; byMaxAge: number[]; steadyState: number };
}
