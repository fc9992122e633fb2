//! Online prediction: least-squares regressions refitted on every completion, starting
//! from the cost model's prior, and a record of how far predictions were off.

use super::config::CostModel;

/// Observations older than this many weigh half as much (the fit follows drift).
const HALF_LIFE: f64 = 2000.0;

/// A linear model `y = w . x` over `N` features, fitted by least squares with
/// exponential forgetting and a ridge toward a prior: each weight's deviation from the
/// prior costs as much as `strength` observations at a typical point would, so the
/// data decide every direction they cover and the prior holds the others.
#[derive(Debug, Clone)]
pub struct Regression<const N: usize> {
    xtx: [[f64; N]; N],
    xty: [f64; N],
    prior: [f64; N],
    ridge: [f64; N],
    weights: [f64; N],
    decay: f64,
    samples: u64,
}

impl<const N: usize> Regression<N> {
    /// A model with `prior` weights, held with `strength` observations' worth at the
    /// feature vector `typical`.
    pub fn new(prior: [f64; N], typical: [f64; N], strength: f64) -> Self {
        let mut ridge = [0.0; N];
        for (r, x) in ridge.iter_mut().zip(typical) {
            *r = strength * x * x;
        }
        Regression {
            xtx: [[0.0; N]; N],
            xty: [0.0; N],
            prior,
            ridge,
            weights: prior,
            decay: 0.5f64.powf(1.0 / HALF_LIFE),
            samples: 0,
        }
    }

    /// The prediction at `x` (never negative).
    pub fn predict(&self, x: &[f64; N]) -> f64 {
        dot(&self.weights, x).max(0.0)
    }

    /// Learns that `x` took `y`, and refits.
    pub fn observe(&mut self, x: &[f64; N], y: f64) {
        if !y.is_finite() || x.iter().any(|v| !v.is_finite()) {
            return;
        }
        for row in self.xtx.iter_mut() {
            for v in row.iter_mut() {
                *v *= self.decay;
            }
        }
        for v in self.xty.iter_mut() {
            *v *= self.decay;
        }
        for i in 0..N {
            for j in 0..N {
                self.xtx[i][j] += x[i] * x[j];
            }
            self.xty[i] += x[i] * y;
        }
        self.samples += 1;
        let mut a = self.xtx;
        let mut b = self.xty;
        for i in 0..N {
            a[i][i] += self.ridge[i];
            b[i] += self.ridge[i] * self.prior[i];
        }
        if let Some(w) = solve(a, b) {
            self.weights = w;
        }
    }

    /// The current weights.
    pub fn weights(&self) -> [f64; N] {
        self.weights
    }

    /// Observations learned from.
    pub fn samples(&self) -> u64 {
        self.samples
    }
}

fn dot<const N: usize>(a: &[f64; N], b: &[f64; N]) -> f64 {
    a.iter().zip(b).map(|(a, b)| a * b).sum()
}

/// Solves `a w = b` by Gaussian elimination with partial pivoting; `None` when `a` is
/// (nearly) singular.
fn solve<const N: usize>(mut a: [[f64; N]; N], mut b: [f64; N]) -> Option<[f64; N]> {
    let scale = (0..N).map(|i| a[i][i].abs()).fold(0.0, f64::max);
    if scale == 0.0 {
        return None;
    }
    for col in 0..N {
        let pivot = (col..N).max_by(|&i, &j| a[i][col].abs().total_cmp(&a[j][col].abs()))?;
        if a[pivot][col].abs() <= scale * 1e-12 {
            return None;
        }
        a.swap(col, pivot);
        b.swap(col, pivot);
        let pivot_row = a[col];
        for row in col + 1..N {
            let f = a[row][col] / pivot_row[col];
            for (v, p) in a[row].iter_mut().zip(pivot_row).skip(col) {
                *v -= f * p;
            }
            b[row] -= f * b[col];
        }
    }
    let mut w = [0.0; N];
    for row in (0..N).rev() {
        let tail: f64 = (row + 1..N).map(|k| a[row][k] * w[k]).sum();
        w[row] = (b[row] - tail) / a[row][row];
    }
    w.iter().all(|v| v.is_finite()).then_some(w)
}

/// Prefill features of `computed` tokens after `prefix` cached ones.
pub fn prefill_features(computed: f64, prefix: f64) -> [f64; 3] {
    [
        1.0,
        computed / 1e3,
        computed * (prefix + computed / 2.0) / 1e6,
    ]
}

/// Transfer features of `blocks` blocks.
pub fn transfer_features(blocks: f64) -> [f64; 2] {
    [1.0, blocks]
}

/// Decode features of a batch of `batch` requests holding `context` tokens.
pub fn decode_features(batch: f64, context: f64) -> [f64; 3] {
    [1.0, batch, context / 1e3]
}

/// The three predictors, started from a cost model.
#[derive(Debug, Clone)]
pub struct Predictors {
    /// Prefill time from (computed tokens, prefix tokens).
    pub prefill: Regression<3>,
    /// Block transfer time from the block count.
    pub transfer: Regression<2>,
    /// Time between tokens from (batch, context tokens).
    pub decode: Regression<3>,
}

impl Predictors {
    /// Predictors whose prior is `model`, held with `strength` observations' worth at
    /// a typical point each.
    pub fn new(model: &CostModel, strength: f64) -> Predictors {
        let p = &model.prefill;
        let t = &model.transfer;
        let d = &model.decode;
        Predictors {
            prefill: Regression::new(
                [p.base_ms, p.ms_per_1k_tokens, p.ms_per_1m_token_pairs],
                prefill_features(4096.0, 4096.0),
                strength,
            ),
            transfer: Regression::new(
                [t.base_ms, t.ms_per_block()],
                transfer_features(16.0),
                strength,
            ),
            decode: Regression::new(
                [d.base_ms, d.ms_per_request, d.ms_per_1k_context],
                decode_features(16.0, 100_000.0),
                strength,
            ),
        }
    }

    /// Predicted prefill time of `computed` tokens after `prefix` cached ones.
    pub fn prefill_ms(&self, computed: f64, prefix: f64) -> f64 {
        self.prefill.predict(&prefill_features(computed, prefix))
    }

    /// Predicted time to move `blocks` blocks (0 for none).
    pub fn transfer_ms(&self, blocks: f64) -> f64 {
        if blocks <= 0.0 {
            return 0.0;
        }
        self.transfer.predict(&transfer_features(blocks))
    }

    /// Predicted time between tokens of a batch of `batch` holding `context` tokens.
    pub fn tbt_ms(&self, batch: f64, context: f64) -> f64 {
        self.decode.predict(&decode_features(batch, context))
    }
}

/// Most relative errors kept for percentiles (the latest ones).
const KEPT_ERRORS: usize = 100_000;

/// Relative prediction errors, `|predicted - actual| / actual`, over all completions
/// and over those after the warm-up.
#[derive(Debug, Clone, Default)]
pub struct ErrorLog {
    seen: u64,
    warmup: u64,
    steady: Vec<f64>,
    next: usize,
    sum_all: f64,
}

impl ErrorLog {
    /// A log that counts errors as steady state after `warmup` observations.
    pub fn new(warmup: u64) -> ErrorLog {
        ErrorLog {
            warmup,
            ..ErrorLog::default()
        }
    }

    /// Records one prediction against what happened (`actual` ≤ 0 is skipped).
    pub fn record(&mut self, predicted: f64, actual: f64) {
        if actual.is_nan() || actual <= 0.0 || !predicted.is_finite() {
            return;
        }
        let e = (predicted - actual).abs() / actual;
        self.seen += 1;
        self.sum_all += e;
        if self.seen <= self.warmup {
            return;
        }
        if self.steady.len() < KEPT_ERRORS {
            self.steady.push(e);
        } else {
            self.steady[self.next] = e;
            self.next = (self.next + 1) % KEPT_ERRORS;
        }
    }

    /// Observations recorded.
    pub fn count(&self) -> u64 {
        self.seen
    }

    /// Mean relative error over every observation.
    pub fn mean_all(&self) -> Option<f64> {
        (self.seen > 0).then(|| self.sum_all / self.seen as f64)
    }

    /// The `q` quantile (0..=1) of the steady-state errors.
    pub fn steady_quantile(&self, q: f64) -> Option<f64> {
        if self.steady.is_empty() {
            return None;
        }
        let mut v = self.steady.clone();
        let i = ((v.len() - 1) as f64 * q.clamp(0.0, 1.0)).round() as usize;
        Some(*v.select_nth_unstable_by(i, f64::total_cmp).1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn regression_learns_the_true_model_away_from_a_wrong_prior() {
        let truth = [50.0, 100.0, 3.0];
        let mut r = Regression::new([10.0, 300.0, 0.0], prefill_features(4096.0, 0.0), 1.0);
        let mut seed = 7u64;
        for _ in 0..2000 {
            seed = seed
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            let n = 256.0 + (seed >> 40) as f64 % 16000.0;
            let prefix = (seed >> 20) as f64 % 20000.0;
            let x = prefill_features(n, prefix);
            r.observe(&x, dot(&truth, &x));
        }
        for (n, prefix) in [(512.0, 0.0), (4096.0, 8192.0), (16000.0, 0.0)] {
            let x = prefill_features(n, prefix);
            let (got, want) = (r.predict(&x), dot(&truth, &x));
            assert!(
                (got - want).abs() < 0.02 * want,
                "{got} vs {want}: {:?}",
                r.weights()
            );
        }
    }

    #[test]
    fn regression_keeps_the_prior_without_data_and_never_predicts_negative() {
        let r = Regression::new([5.0, -1.0], [1.0, 10.0], 10.0);
        assert_eq!(r.weights(), [5.0, -1.0]);
        assert_eq!(r.predict(&[1.0, 100.0]), 0.0);
    }

    #[test]
    fn solve_refuses_singular_systems() {
        assert!(solve([[1.0, 2.0], [2.0, 4.0]], [1.0, 2.0]).is_none());
        assert_eq!(
            solve([[2.0, 0.0], [0.0, 4.0]], [2.0, 2.0]),
            Some([1.0, 0.5])
        );
    }

    #[test]
    fn error_log_counts_steady_state_after_warmup() {
        let mut log = ErrorLog::new(2);
        log.record(200.0, 100.0);
        log.record(200.0, 100.0);
        log.record(110.0, 100.0);
        log.record(90.0, 100.0);
        log.record(130.0, 100.0);
        log.record(1.0, 0.0);
        assert_eq!(log.count(), 5);
        let median = log.steady_quantile(0.5).unwrap();
        assert!((median - 0.1).abs() < 1e-9);
        assert!((log.mean_all().unwrap() - 2.5 / 5.0).abs() < 1e-9);
    }
}
