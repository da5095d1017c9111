/*
 * The trading environment's step as one kernel: one thread per env applies the execution rule of
 * `env::exec` to all A assets (stop check, sells before buys, the buys' sequential cash cap, fees and
 * slippage, cooldowns), computes reward and equity, ends and resets the episode from a counter-based
 * SplitMix64 (the draw VecEnv's shared stream would make), and writes the next observation in
 * `VecEnv::observe`'s layout into the policy's input buffer.
 *
 * One source, two builds:
 * - CUDA C++ through NVRTC (`env::kernel::cuda`, compiled at run time with --fmad=false): one thread per env.
 * - Plain C through the `cc` crate (build.rs, -ffp-contract=off): the same bodies in a loop over an env
 *   range, called from Rust (`env::kernel::CpuKernelEnv`), so CI without a GPU checks this code bit for
 *   bit against `VecEnv`.
 * Every floating-point expression mirrors `exec.rs`/`vec_env.rs` operation by operation; the two builds
 * and VecEnv agree bit for bit as long as no operation is contracted into an FMA.
 *
 * The layout of `tb_params` and `tb_buffers` is mirrored by `#[repr(C)]` structs in `kernel/mod.rs`.
 */

#ifdef __CUDACC__
typedef unsigned long long tb_u64;
typedef unsigned int tb_u32;
typedef int tb_i32;
#define TB_FN static __device__ __forceinline__
#else
#include <math.h>
#include <stddef.h>
#include <stdint.h>
typedef uint64_t tb_u64;
typedef uint32_t tb_u32;
typedef int32_t tb_i32;
#define TB_FN static inline
#endif

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
    /* the policy's actions [E, A] */
    const float *actions;
    /* per env */
    double *cash;
    double *equity;
    tb_i32 *day;
    tb_i32 *steps;
    tb_u64 *draws; /* index of the env's next draw in VecEnv's shared SplitMix64 stream */
    /* per env and asset (see env_stride / asset_stride) */
    double *holding;
    double *entry;
    double *high_water;
    tb_u32 *cooldown;
    /* outputs: reward, done (0/1), equity before any reset, observation rows */
    float *reward;
    float *done;
    double *equity_out;
    float *obs;
    /* finished episodes: sum of total returns (final equity / initial cash - 1) and their count, per env,
     * accumulated until the host reads and clears them (once per PPO update) */
    double *ret_sum;
    double *ret_count;
    /* a trial's values per trial in a population; null for one env set */
    const tb_trial *trials;
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

/* exec::sell_phase. */
TB_FN double tb_sell_phase(const tb_params *p, double *holding, double *entry, double *hw, tb_u32 *cd, double *cash,
                           double price, double action) {
    if (*cd > 0) *cd -= 1;
    if (*holding > 0.0) {
        *hw = tb_max(*hw, price);
        if (p->trailing_stop > 0.0 && price <= *hw * (1.0 - p->trailing_stop)) {
            double n = tb_sell(p, holding, entry, hw, cash, price, *holding);
            *cd = p->cooldown_bars == 0xFFFFFFFFu ? p->cooldown_bars : p->cooldown_bars + 1;
            return n;
        }
    }
    if (action >= 0.0) return 0.0;
    double want = tb_units(p, action);
    if (want < p->min_order || want <= 0.0) return 0.0;
    return tb_sell(p, holding, entry, hw, cash, price, tb_min(want, *holding));
}

/* exec::buy_phase. */
TB_FN double tb_buy_phase(const tb_params *p, double *holding, double *entry, double *hw, const tb_u32 *cd,
                          double *cash, double price, double action) {
    if (action <= 0.0 || *cd > 0) return 0.0;
    double want = tb_units(p, action);
    if (want < p->min_order || want <= 0.0) return 0.0;
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

/* exec::liquidate. */
TB_FN double tb_liquidate(const tb_params *p, double *holding, double *entry, double *hw, tb_u32 *cd, double *cash,
                          double price) {
    if (*cd > 0) *cd -= 1;
    return tb_sell(p, holding, entry, hw, cash, price, *holding);
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
    double change = equity - b->equity[i];
    b->cash[i] = cash;
    b->equity[i] = equity;
    double reward = p->reward_scale * (change - p->turnover_penalty * turnover);
    b->reward[i] = (float)reward;
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
TB_KERNEL(tb_env_observe, tb_observe_one)

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
}
#endif
