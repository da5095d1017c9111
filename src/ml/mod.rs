//! The machine-learning helpers the trainers share (feature `train`): bfloat16 autocast on CUDA
//! (`autocast`), the GPU as NVML and CUDA see it (`gpu`), Adam (`optim`), counted tensor reads into host
//! memory (`readback`), seeded initialisation on libtorch's global generator (`seeded`).

pub mod autocast;
pub mod gpu;
pub mod optim;
pub mod readback;
pub mod seeded;
