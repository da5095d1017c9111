/*
 * The trading environment's step as one kernel: one thread per env applies the execution rule of
 * `crate::exec` (src/exec.rs) to all A assets (stop check, sells before buys, the buys' sequential cash
 * cap, fees and slippage, cooldowns) to the orders of its action space (FinRL's share counts, or target
 * weights with a no-trade band as `exec::weights` sizes them), computes equity and the reward
 * (`env::reward`: the equity change, the log return against a benchmark, or the differential Sharpe ratio
 * with its moments), ends and resets the episode from a counter-based SplitMix64 (the draw VecEnv's shared
 * stream would make), and writes the next observation in `VecEnv::observe`'s layout into the policy's input
 * buffer.
 *
 * One source, two builds:
 * - CUDA C++ through NVRTC (`env::kernel::cuda`, compiled at run time with --fmad=false): one thread per env.
 * - Plain C through the `cc` crate (build.rs, -ffp-contract=off): the same bodies in a loop over an env
 *   range, called from Rust (`env::kernel::CpuKernelEnv`), so CI without a GPU checks this code bit for
 *   bit against `VecEnv`.
 * Every floating-point expression mirrors `exec.rs`/`vec_env.rs`/`one_env.rs`/`weights.rs`/`reward.rs`
 * operation by operation; the CPU build and VecEnv agree bit for bit as long as no operation is contracted
 * into an FMA, since both call the same libm for `exp`, `log` and `pow` (Rust's f64 methods lower to it).
 * On CUDA, `exp`, `log` and `pow` are CUDA's own device functions, which may differ from the host libm in
 * the last bits: the weights action space and the vs-benchmark and differential-Sharpe rewards can then
 * drift from the CPU build by an ulp or so; the share counts with the equity reward use none of them.
 *
 * The layout of `tb_params` and `tb_buffers` is mirrored by `#[repr(C)]` structs in `kernel/mod.rs` and
 * `kernel/state.rs` (the latter made from the one table of the kernel's state).
 */

#ifdef __CUDACC__
typedef unsigned long long tb_u64;
typedef unsigned int tb_u32;
typedef int tb_i32;
#define TB_FN static __device__ __forceinline__
#define TB_MATH static __device__ __noinline__
#else
#include <math.h>
#include <stddef.h>
#include <stdint.h>
typedef uint64_t tb_u64;
typedef uint32_t tb_u32;
typedef int32_t tb_i32;
#define TB_FN static inline
#define TB_MATH static inline
#endif

/* exp, log and pow: the host's libm in the CPU build (the one Rust's f64 methods call, so the results
 * match VecEnv's bit for bit); CUDA's device functions on the GPU, which use fused multiply-adds by design
 * and may differ from libm in the last bits. Kept out of line on the GPU so that a test can check that the
 * kernel's own arithmetic has no FMA (`the_kernel_source_compiles_for_cuda_with_nvrtc`). */
TB_MATH double tb_exp(double x) { return exp(x); }
TB_MATH double tb_log(double x) { return log(x); }
TB_MATH double tb_pow(double x, double y) { return pow(x, y); }

typedef struct {
    double max_trade;
    double min_order;
    double fee_rate;  /* fee_bps * 1e-4, computed on the host as ExecParams::fee_rate does */
    double slip_rate; /* slippage_bps * 1e-4 */
    double trailing_stop;
    double initial_cash;
    double reward_scale;
    double turnover_penalty;
    double turbulence_threshold;
    double band;        /* the weights space's no-trade band (a fraction of equity) */
    double max_weight;  /* the weights space's cap per asset */
    double turnover_bps; /* vs-benchmark and differential-sharpe: the turnover penalty in basis points */
    double sharpe_eta;  /* differential-sharpe: the moments' rate */
    tb_u64 seed;
    tb_u32 cooldown_bars;
    tb_i32 n_envs;
    tb_i32 n_assets;
    tb_i32 n_features;
    tb_i32 n_days;
    tb_i32 episode_len;
    tb_i32 integer_units;
    tb_i32 cash_cap_ignores_fees;
    tb_i32 fixed_start;
    tb_i32 has_turbulence;
    tb_i32 action_weights; /* 0: share counts (FinRL's), 1: target weights with a no-trade band */
    tb_i32 reward_kind;    /* TB_REWARD_* */
    tb_i32 bench_symbol;   /* vs-benchmark: 1 = the index series `benchmark`, 0 = equal-weight buy-and-hold */
    /* Position arrays are indexed env * env_stride + asset * asset_stride: env-major on the CPU
     * (env_stride = A, asset_stride = 1), asset-major on the GPU so that neighbouring threads read
     * neighbouring words (env_stride = 1, asset_stride = E). */
    tb_i32 env_stride;
    tb_i32 asset_stride;
    tb_i32 obs_stride; /* floats per observation row, >= 1 + A * (1 + F) */
    /* In a population (several trials' envs in one launch, `trials` non-null): envs per trial. Env i
     * belongs to trial i / trial_envs and is env i % trial_envs of that trial's own stream. */
    tb_i32 trial_envs;
} tb_params;

#define TB_REWARD_EQUITY 0
#define TB_REWARD_VS_BENCHMARK 1
#define TB_REWARD_DIFFERENTIAL_SHARPE 2
#define TB_LOGIT_SCALE 5.0 /* weights.rs: LOGIT_SCALE */
#define TB_DSR_CLIP 5.0    /* reward.rs: DSR_CLIP */

/* A trial's own values in a population: what a search tunes in the env, and the trial's seed. */
typedef struct {
    double trailing_stop;
    double reward_scale;
    tb_u64 seed;
    tb_u32 cooldown_bars;
    tb_u32 pad;
} tb_trial;

typedef struct {
    /* the panel, read-only: prices [T, A], features [T, A, F], turbulence [T] (null without) */
    const float *prices;
    const float *features;
    const double *turbulence;
    const float *benchmark; /* an index symbol's price [T] (null unless the vs-benchmark reward uses one) */
    /* a trial's values per trial in a population; null for one env set */
    const tb_trial *trials;
    /* the state, in the order of the table in `kernel/state.rs`: the policy's actions [E, A] first */
    const float *actions;
    /* per env */
    double *cash;
    double *equity;
    double *sharpe_a; /* the differential Sharpe ratio's moving moments A and B (zero at each episode start) */
    double *sharpe_b;
    tb_i32 *day;
    tb_i32 *steps;
    tb_u64 *draws; /* index of the env's next draw in VecEnv's shared SplitMix64 stream */
    /* per env and asset (see env_stride / asset_stride) */
    double *holding;
    double *entry;
    double *high_water;
    tb_u32 *cooldown;
    double *order; /* the weights space's units to trade this step (scratch, position layout) */
    /* outputs: reward, done (0/1), equity before any reset, observation rows */
    float *reward;
    float *done;
    double *equity_out;
    float *obs;
    /* finished episodes: sum of total returns (final equity / initial cash - 1) and their count, per env,
     * accumulated until the host reads and clears them (once per PPO update) */
    double *ret_sum;
    double *ret_count;
} tb_buffers;

/* The n-th output (0-based) of SplitMix64 seeded with `seed`: the generator is a counter, so any draw
 * of the stream can be made without the ones before it. */
TB_FN tb_u64 tb_splitmix(tb_u64 seed, tb_u64 n) {
    tb_u64 z = seed + (n + 1) * 0x9E3779B97F4A7C15ULL;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
}

/* Rust's f64::max / f64::min for the non-NaN values they see here. */
TB_FN double tb_max(double a, double b) { return a < b ? b : a; }
TB_FN double tb_min(double a, double b) { return b < a ? b : a; }

/* ExecParams::units: requested units, sign dropped, truncated to whole units when asked. */
TB_FN double tb_units(const tb_params *p, double action) {
    double c = action < -1.0 ? -1.0 : (action > 1.0 ? 1.0 : action);
    double q = fabs(c) * p->max_trade;
    return p->integer_units ? trunc(q) : q;
}

/* exec::sell for one position; returns the notional. */
TB_FN double tb_sell(const tb_params *p, double *holding, double *entry, double *hw, double *cash, double price,
                     double qty) {
    if (qty <= 0.0) return 0.0;
    double px = price * (1.0 - p->slip_rate);
    double notional = px * qty;
    double fee = notional * p->fee_rate;
    *cash += notional - fee;
    *holding -= qty;
    if (*holding <= 0.0) {
        *holding = 0.0;
        *entry = 0.0;
        *hw = 0.0;
    }
    return notional;
}

/* exec::sell_units_phase: the stop check, then a sell of `want` units (>= 0; 0 = none). */
TB_FN double tb_sell_units(const tb_params *p, double *holding, double *entry, double *hw, tb_u32 *cd, double *cash,
                           double price, double want) {
    if (*cd > 0) *cd -= 1;
    if (*holding > 0.0) {
        *hw = tb_max(*hw, price);
        if (p->trailing_stop > 0.0 && price <= *hw * (1.0 - p->trailing_stop)) {
            double n = tb_sell(p, holding, entry, hw, cash, price, *holding);
            *cd = p->cooldown_bars == 0xFFFFFFFFu ? p->cooldown_bars : p->cooldown_bars + 1;
            return n;
        }
    }
    if (want < p->min_order || want <= 0.0) return 0.0;
    return tb_sell(p, holding, entry, hw, cash, price, tb_min(want, *holding));
}

/* exec::sell_phase. */
TB_FN double tb_sell_phase(const tb_params *p, double *holding, double *entry, double *hw, tb_u32 *cd, double *cash,
                           double price, double action) {
    double want = action >= 0.0 ? 0.0 : tb_units(p, action);
    return tb_sell_units(p, holding, entry, hw, cd, cash, price, want);
}

/* exec::buy_units_phase: a buy of `want` units (>= 0; 0 = none), unless cooling down. */
TB_FN double tb_buy_units(const tb_params *p, double *holding, double *entry, double *hw, const tb_u32 *cd,
                          double *cash, double price, double want) {
    if (*cd > 0 || want < p->min_order || want <= 0.0) return 0.0;
    double px = price * (1.0 + p->slip_rate);
    double unit_cost = p->cash_cap_ignores_fees ? px : px * (1.0 + p->fee_rate);
    double affordable = tb_max(*cash / unit_cost, 0.0);
    if (p->integer_units) affordable = floor(affordable);
    double qty = tb_min(want, affordable);
    if (qty <= 0.0) return 0.0;
    double notional = px * qty;
    double fee = notional * p->fee_rate;
    double spent = notional + fee;
    *cash = p->cash_cap_ignores_fees ? *cash - spent : tb_max(*cash - spent, 0.0);
    double held = *holding;
    *entry = held > 0.0 ? (*entry * held + px * qty) / (held + qty) : px;
    *hw = held > 0.0 ? tb_max(*hw, price) : price;
    *holding = held + qty;
    return notional;
}

/* exec::buy_phase. */
TB_FN double tb_buy_phase(const tb_params *p, double *holding, double *entry, double *hw, const tb_u32 *cd,
                          double *cash, double price, double action) {
    if (action <= 0.0) return 0.0;
    return tb_buy_units(p, holding, entry, hw, cd, cash, price, tb_units(p, action));
}

/* exec::liquidate. */
TB_FN double tb_liquidate(const tb_params *p, double *holding, double *entry, double *hw, tb_u32 *cd, double *cash,
                          double price) {
    if (*cd > 0) *cd -= 1;
    return tb_sell(p, holding, entry, hw, cash, price, *holding);
}

/* weights::target_weights' logit of one action: NaN counts as 0, clamped to [-1, 1], scaled. */
TB_FN double tb_logit(float x) {
    if (x != x) return 0.0;
    double c = (double)x;
    return (c < -1.0 ? -1.0 : (c > 1.0 ? 1.0 : c)) * TB_LOGIT_SCALE;
}

/* weights::band_orders for one asset: the units (> 0 buy, < 0 sell, 0 none) that bring its weight back
 * to the band's edge when it is outside `target ± band`. */
TB_FN double tb_band_units(const tb_params *p, double target, double held, double price, double equity) {
    if (equity != equity || equity <= 0.0 || price != price || price <= 0.0) return 0.0;
    double w = held * price / equity;
    double edge;
    if (w > target + p->band) {
        edge = target + p->band;
    } else if (w < target - p->band) {
        edge = target - p->band;
    } else {
        return 0.0;
    }
    double units = (edge - w) * equity / price;
    if (p->integer_units) {
        /* Toward zero, except for a float's hair below a whole unit. */
        double near = round(units);
        units = fabs(units - near) < 1e-9 ? near : trunc(units);
    }
    units = fmax(units, -held);
    return fabs(units) >= p->min_order && units != 0.0 ? units : 0.0;
}

/* OneEnv::trade_weights: target weights (softmax over the scaled actions and cash's logit 0, capped per
 * asset) sized into band orders at the observation day's prices (`day - 1`, all the engine knows when it
 * decides) and executed at `day`'s: every sell (with the stop check), then every buy. Returns the
 * turnover. */
TB_FN double tb_trade_weights(const tb_params *p, const tb_buffers *b, tb_i32 i, tb_i32 day, double *cash) {
    tb_i32 a = p->n_assets;
    const float *act = b->actions + (long long)i * a;
    const float *seen = b->prices + (long long)(day - 1) * a;
    const float *prices = b->prices + (long long)day * a;
    long long base = (long long)i * p->env_stride;
    long long s = p->asset_stride;
    /* Subtracting the largest logit (at least cash's 0) keeps exp() finite. */
    double top = 0.0;
    for (tb_i32 k = 0; k < a; ++k) top = fmax(top, tb_logit(act[k]));
    double sum = tb_exp(-top);
    for (tb_i32 k = 0; k < a; ++k) sum += tb_exp(tb_logit(act[k]) - top);
    double equity = *cash;
    for (tb_i32 k = 0; k < a; ++k) equity += b->holding[base + k * s] * (double)seen[k];
    for (tb_i32 k = 0; k < a; ++k) {
        long long at = base + k * s;
        double target = fmin(tb_exp(tb_logit(act[k]) - top) / sum, p->max_weight);
        b->order[at] = tb_band_units(p, target, b->holding[at], (double)seen[k], equity);
    }
    double turnover = 0.0;
    for (tb_i32 k = 0; k < a; ++k) {
        long long at = base + k * s;
        turnover += tb_sell_units(p, &b->holding[at], &b->entry[at], &b->high_water[at], &b->cooldown[at], cash,
                                  (double)prices[k], fmax(-b->order[at], 0.0));
    }
    for (tb_i32 k = 0; k < a; ++k) {
        long long at = base + k * s;
        turnover += tb_buy_units(p, &b->holding[at], &b->entry[at], &b->high_water[at], &b->cooldown[at], cash,
                                 (double)prices[k], fmax(b->order[at], 0.0));
    }
    return turnover;
}

/* reward::net_log_return's logarithm: ln(now / before) floored at 1e-12, 0 without a positive `before`. */
TB_FN double tb_ln_ratio(double now, double before) {
    return before > 0.0 ? tb_log(fmax(now / before, 1e-12)) : 0.0;
}

/* reward::net_log_return, the benchmark's log return `bench` given (0 for none). */
TB_FN double tb_net_log_return(double equity, double prev, double bench, double turnover, double bps) {
    double cost = prev > 0.0 ? bps * 1e-4 * turnover / prev : 0.0;
    return tb_ln_ratio(equity, prev) - bench - cost;
}

/* one_env::benchmark_value: the benchmark at `day` for an episode that started at `start` (1 there). */
TB_FN double tb_benchmark(const tb_params *p, const tb_buffers *b, tb_i32 start, tb_i32 day) {
    if (p->bench_symbol) return (double)b->benchmark[day] / (double)b->benchmark[start];
    tb_i32 a = p->n_assets;
    double sum = 0.0;
    for (tb_i32 k = 0; k < a; ++k)
        sum += (double)b->prices[(long long)day * a + k] / (double)b->prices[(long long)start * a + k];
    return sum / (double)a;
}

/* reward::differential_sharpe: D_t of the return `r`; moves the moments (a, b). */
TB_FN double tb_differential_sharpe(double r, double eta, double *a, double *b) {
    double da = r - *a, db = r * r - *b;
    double var = *b - *a * *a;
    double d = var > 0.0 ? (*b * da - 0.5 * *a * db) / tb_pow(var, 1.5) : 0.0;
    *a += eta * da;
    *b += eta * db;
    return d < -TB_DSR_CLIP ? -TB_DSR_CLIP : (d > TB_DSR_CLIP ? TB_DSR_CLIP : d);
}

/* OneEnv::reward: the step's reward from the equity before (`prev`) and after it. */
TB_FN double tb_reward(const tb_params *p, const tb_buffers *b, tb_i32 i, double equity, double prev,
                       double turnover) {
    if (p->reward_kind == TB_REWARD_VS_BENCHMARK) {
        tb_i32 day = b->day[i], start = day - b->steps[i];
        double bench = tb_ln_ratio(tb_benchmark(p, b, start, day), tb_benchmark(p, b, start, day - 1));
        return p->reward_scale * p->initial_cash * tb_net_log_return(equity, prev, bench, turnover, p->turnover_bps);
    }
    if (p->reward_kind == TB_REWARD_DIFFERENTIAL_SHARPE) {
        double r = tb_net_log_return(equity, prev, 0.0, turnover, p->turnover_bps);
        return tb_differential_sharpe(r, p->sharpe_eta, &b->sharpe_a[i], &b->sharpe_b[i]);
    }
    return p->reward_scale * (equity - prev - p->turnover_penalty * turnover);
}

/* VecEnv::observe for one env. */
TB_FN void tb_observe_one(const tb_params *p, const tb_buffers *b, tb_i32 i) {
    tb_i32 a = p->n_assets, f = p->n_features, day = b->day[i];
    float *o = b->obs + (long long)i * p->obs_stride;
    o[0] = (float)(b->cash[i] / p->initial_cash);
    for (tb_i32 k = 0; k < a; ++k) {
        long long at = (long long)i * p->env_stride + (long long)k * p->asset_stride;
        double value = b->holding[at] * (double)b->prices[(long long)day * a + k];
        float *row = o + 1 + k * (1 + f);
        row[0] = (float)(value / p->initial_cash);
        const float *src = b->features + ((long long)day * a + k) * f;
        for (tb_i32 j = 0; j < f; ++j) row[1 + j] = src[j];
    }
}

/* VecEnv::reset_env for one env. */
TB_FN void tb_reset_one(const tb_params *p, const tb_buffers *b, tb_i32 i) {
    if (p->fixed_start) {
        b->day[i] = 0;
    } else {
        tb_u64 n = b->draws[i];
        b->draws[i] = n + (tb_u64)p->n_envs;
        tb_u64 span = (tb_u64)(p->n_days - p->episode_len);
        b->day[i] = (tb_i32)(tb_splitmix(p->seed, n) % span);
    }
    b->steps[i] = 0;
    b->cash[i] = p->initial_cash;
    b->equity[i] = p->initial_cash;
    b->sharpe_a[i] = 0.0;
    b->sharpe_b[i] = 0.0;
    for (tb_i32 k = 0; k < p->n_assets; ++k) {
        long long at = (long long)i * p->env_stride + (long long)k * p->asset_stride;
        b->holding[at] = 0.0;
        b->entry[at] = 0.0;
        b->high_water[at] = 0.0;
        b->cooldown[at] = 0;
    }
}

/* VecEnv::new's state for one env: its first draw is the env's index, then the first observation. */
TB_FN void tb_init_one(const tb_params *p, const tb_buffers *b, tb_i32 i) {
    b->draws[i] = (tb_u64)i;
    b->ret_sum[i] = 0.0;
    b->ret_count[i] = 0.0;
    tb_reset_one(p, b, i);
    tb_observe_one(p, b, i);
}

/* VecEnv::step_env, then the episode end and reset of VecEnv::step, then the next observation. In a
 * population, env i steps with its trial's values (and draws its episode starts from its trial's stream,
 * `n_envs` being the trial's env count there), so it moves exactly as it would in its trial's env alone. */
TB_FN void tb_step_one(const tb_params *p0, const tb_buffers *b, tb_i32 i) {
    tb_params own = *p0;
    if (b->trials) {
        const tb_trial *t = &b->trials[i / p0->trial_envs];
        own.trailing_stop = t->trailing_stop;
        own.reward_scale = t->reward_scale;
        own.seed = t->seed;
        own.cooldown_bars = t->cooldown_bars;
        own.n_envs = p0->trial_envs;
    }
    const tb_params *p = &own;
    tb_i32 a = p->n_assets;
    tb_i32 day = b->day[i] + 1;
    tb_i32 steps = b->steps[i] + 1;
    b->day[i] = day;
    b->steps[i] = steps;
    const float *prices = b->prices + (long long)day * a;
    const float *act = b->actions + (long long)i * a;
    double cash = b->cash[i];
    int turbulent = p->has_turbulence && b->turbulence[day] > p->turbulence_threshold;
    double turnover = 0.0;
    long long base = (long long)i * p->env_stride;
    long long s = p->asset_stride;
    if (turbulent) {
        for (tb_i32 k = 0; k < a; ++k) {
            long long at = base + k * s;
            turnover += tb_liquidate(p, &b->holding[at], &b->entry[at], &b->high_water[at], &b->cooldown[at], &cash,
                                     (double)prices[k]);
        }
    } else if (p->action_weights) {
        turnover = tb_trade_weights(p, b, i, day, &cash);
    } else {
        for (tb_i32 k = 0; k < a; ++k) {
            long long at = base + k * s;
            float x = act[k];
            double action = x != x ? 0.0 : (double)x;
            turnover += tb_sell_phase(p, &b->holding[at], &b->entry[at], &b->high_water[at], &b->cooldown[at], &cash,
                                      (double)prices[k], action);
        }
        for (tb_i32 k = 0; k < a; ++k) {
            long long at = base + k * s;
            float x = act[k];
            double action = x != x ? 0.0 : (double)x;
            turnover += tb_buy_phase(p, &b->holding[at], &b->entry[at], &b->high_water[at], &b->cooldown[at], &cash,
                                     (double)prices[k], action);
        }
    }
    double equity = cash;
    for (tb_i32 k = 0; k < a; ++k) equity += b->holding[base + k * s] * (double)prices[k];
    double prev = b->equity[i];
    b->cash[i] = cash;
    b->equity[i] = equity;
    b->reward[i] = (float)tb_reward(p, b, i, equity, prev, turnover);
    b->equity_out[i] = equity;
    int done = steps == p->episode_len;
    b->done[i] = done ? 1.0f : 0.0f;
    if (done) {
        b->ret_sum[i] += equity / p->initial_cash - 1.0;
        b->ret_count[i] += 1.0;
        tb_reset_one(p, b, i);
    }
    tb_observe_one(p, b, i);
}

/* Entry points: a grid of one thread per env on the GPU, a loop over [lo, hi) on the CPU. */
#ifdef __CUDACC__
#define TB_KERNEL(name, body)                                                                                    \
    extern "C" __global__ void name(const tb_params p, const tb_buffers b) {                                    \
        tb_i32 i = (tb_i32)(blockIdx.x * blockDim.x + threadIdx.x);                                             \
        if (i < p.n_envs) body(&p, &b, i);                                                                       \
    }
#else
#define TB_KERNEL(name, body)                                                                                    \
    void name(const tb_params *p, const tb_buffers *b, tb_i32 lo, tb_i32 hi) {                                  \
        for (tb_i32 i = lo; i < hi; ++i) body(p, b, i);                                                          \
    }
#endif

TB_KERNEL(tb_env_init, tb_init_one)
TB_KERNEL(tb_env_step, tb_step_one)

#ifndef __CUDACC__
/* The structs' layout as this compiler sees it, for the test that checks the Rust mirrors. */
void tb_layout(tb_i32 *out) {
    out[0] = (tb_i32)sizeof(tb_params);
    out[1] = (tb_i32)offsetof(tb_params, seed);
    out[2] = (tb_i32)offsetof(tb_params, cooldown_bars);
    out[3] = (tb_i32)offsetof(tb_params, obs_stride);
    out[4] = (tb_i32)sizeof(tb_buffers);
    out[5] = (tb_i32)offsetof(tb_buffers, holding);
    out[6] = (tb_i32)offsetof(tb_buffers, ret_count);
    out[7] = (tb_i32)sizeof(tb_trial);
    out[8] = (tb_i32)offsetof(tb_trial, cooldown_bars);
    out[9] = (tb_i32)offsetof(tb_params, sharpe_eta);
    out[10] = (tb_i32)offsetof(tb_params, bench_symbol);
    out[11] = (tb_i32)offsetof(tb_buffers, benchmark);
    out[12] = (tb_i32)offsetof(tb_buffers, sharpe_b);
    out[13] = (tb_i32)offsetof(tb_buffers, order);
}
#endif
