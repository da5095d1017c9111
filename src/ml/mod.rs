//! The machine-learning helpers the trainers share (feature `train`): bfloat16 autocast on CUDA
//! (`autocast`), the GPU as NVML and CUDA see it (`gpu`), activations that vectorise and their AVX2
//! dispatch (`lanes`), Adam (`optim`), counted tensor reads into host memory (`readback`), seeded
//! initialisation on libtorch's global generator (`seeded`).

pub(crate) mod autocast;
pub(crate) mod gpu;
pub(crate) mod lanes;
pub(crate) mod optim;
pub(crate) mod readback;
pub(crate) mod seeded;
