/*
 * GAE(lambda) as one reverse scan per env: thread e walks t = T-1 .. 0 over the rollout's [T, E] rewards,
 * values and done flags and writes the advantages, the recurrence
 *     delta_t = (r_t + (v_{t+1} * gamma) * (1 - d_t)) - v_t      (v_T = the value after the rollout)
 *     A_t     = delta_t + (A_{t+1} * gamma_lambda) * (1 - d_t)   (A_T = 0)
 * in float32, operation by operation as `rl::ppo::gae::gae_ops` computes it with tensor ops, so the two
 * agree bit for bit as long as nothing is contracted into an FMA.
 *
 * One source, two builds, as env_step.c: CUDA C++ through NVRTC (--fmad=false), one thread per env; plain C
 * through the `cc` crate (build.rs, -ffp-contract=off), a loop over an env range.
 * `tb_gae_params` and `tb_gae_buffers` are mirrored by `#[repr(C)]` structs in `rl/ppo/gae.rs`.
 */

#ifdef __CUDACC__
#define TB_GAE_FN static __device__ __forceinline__
#else
#define TB_GAE_FN static inline
#endif

typedef struct {
    float gamma;
    float gamma_lambda; /* (float)(gamma * lambda), the product taken in double as the tensor code does */
    int t_len;
    int n_envs;
} tb_gae_params;

typedef struct {
    const float *rewards;    /* [T, E] */
    const float *values;     /* [T, E] */
    const float *dones;      /* [T, E], 1 where the episode ended at that step */
    const float *last_value; /* [E] */
    float *advantages;       /* [T, E], written */
} tb_gae_buffers;

TB_GAE_FN void tb_gae_one(const tb_gae_params *p, const tb_gae_buffers *b, int e) {
    float last = 0.0f;
    for (int t = p->t_len - 1; t >= 0; --t) {
        long long i = (long long)t * p->n_envs + e;
        float not_done = 1.0f - b->dones[i];
        float next = t + 1 == p->t_len ? b->last_value[e] : b->values[i + p->n_envs];
        float delta = (b->rewards[i] + (next * p->gamma) * not_done) - b->values[i];
        last = delta + (last * p->gamma_lambda) * not_done;
        b->advantages[i] = last;
    }
}

#ifdef __CUDACC__
extern "C" __global__ void tb_gae(const tb_gae_params p, const tb_gae_buffers b) {
    int e = (int)(blockIdx.x * blockDim.x + threadIdx.x);
    if (e < p.n_envs) tb_gae_one(&p, &b, e);
}
#else
void tb_gae(const tb_gae_params *p, const tb_gae_buffers *b, int lo, int hi) {
    for (int e = lo; e < hi; ++e) tb_gae_one(p, b, e);
}
#endif
