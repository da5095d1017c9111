//! A CPU minibatch's gradient in parts, one thread each.
//!
//! On the CPU libtorch runs the LSTM on its intra-op threads (OpenMP), which meet at a barrier several
//! times per time step: at a hidden size of a few dozen the barriers, not the arithmetic, set the pace.
//! Here the minibatch is cut into as many contiguous parts as libtorch has intra-op threads; each part's
//! forward and backward pass runs on a thread of its own with one OpenMP thread (the caller's thread takes
//! the first part), and the parts' gradients are summed in part order. Each part's loss is its
//! class-weighted sum over the whole batch's total weight, so the parts' losses sum to the batch's weighted
//! mean and their gradients to its gradient: the same loss as one pass over the batch, with its additions
//! in another order (so other bits than one pass; the same bits from run to run on a machine with the same
//! number of threads, as one pass's OpenMP reductions are too).
//!
//! Each part runs its LSTM layers natively (`super::native`: libtorch's LSTM spent most of an epoch in
//! its kernels at these sizes), their last hidden states entering libtorch's graph for the rest of the
//! network and the loss; with one thread the minibatch is one such part. Where the layers' weights are
//! not f32 on the CPU the parts run libtorch's LSTM.

use super::dataset::WindowDataset;
use super::model::LstmNet;
use super::native::Tape;
use crate::onnx::lstm::LstmLayer;
use std::cell::RefCell;
use std::sync::Arc;
use std::sync::mpsc::{Receiver, Sender, channel};
use std::thread::JoinHandle;
use tch::{Device, Kind, Tensor};

/// How many parts a minibatch is cut into on `device`: libtorch's intra-op threads on the CPU (one with
/// one thread); one on CUDA, where the trainer takes a minibatch in one pass on libtorch's own threads.
pub(crate) fn count(device: Device) -> usize {
    match device {
        Device::Cpu => usize::try_from(tch::get_num_threads()).unwrap_or(1).max(1),
        _ => 1,
    }
}

/// One part's work: its samples, the batch's total weight, and the LSTM layers' weights in host memory
/// for the native pass (copied once per minibatch and shared by its parts; `None` where the parts run
/// libtorch's LSTM).
struct Job {
    idx: Tensor,
    total: Tensor,
    layers: Option<Arc<[LstmLayer; 2]>>,
}

/// One part's loss (detached) and the gradients of the parameters; the reason if it failed (a panic's
/// message, or the native pass's error).
type Done = Result<(Tensor, Vec<Tensor>), String>;

/// What a thread needs for its part: its own handles on the network, the data, the class weights and the
/// parameters (the same tensors: no copy), and the native LSTM layers' buffers.
struct Part {
    net: LstmNet,
    ds: WindowDataset,
    weights: Option<Tensor>,
    params: Vec<Tensor>,
    native: Option<NativeLayers>,
}

/// The LSTM layers run natively (`super::native`): which parameter is which layer's weight, and the
/// layers' tapes and input buffer, kept from one minibatch to the next.
struct NativeLayers {
    /// For each parameter, in `Part::params`' order: `(layer, weight)` (layer 0 fast, 1 slow; weight in
    /// libtorch's order `w_ih, w_hh, b_ih, b_hh`), or `None` for a parameter past the LSTM layers.
    slots: Vec<Option<(usize, usize)>>,
    tapes: RefCell<[Tape; 2]>,
    input: RefCell<Vec<f32>>,
}

impl NativeLayers {
    /// Where the LSTM layers' f32 weights on the CPU are among `params`, every one of them; `None` (the
    /// parts then run libtorch's LSTM) where one is not there or not f32 on the CPU.
    fn new(net: &LstmNet, params: &[Tensor]) -> Option<NativeLayers> {
        let mut found = 0;
        let slots: Vec<Option<(usize, usize)>> = params
            .iter()
            .map(|p| {
                let slot = net.recurrent().iter().enumerate().find_map(|(l, layer)| {
                    layer.weights().iter().position(|w| w.data_ptr() == p.data_ptr()).map(|k| (l, k))
                });
                found += usize::from(slot.is_some());
                slot
            })
            .collect();
        let host_f32 = |t: &Tensor| t.device() == Device::Cpu && t.kind() == Kind::Float;
        let all = net.recurrent().iter().map(|l| l.weights().len()).sum::<usize>();
        (found == all && net.recurrent().iter().all(|l| l.weights().iter().all(host_f32))).then(|| NativeLayers {
            slots,
            tapes: RefCell::new(Default::default()),
            input: RefCell::new(Vec::new()),
        })
    }
}

/// The two LSTM layers' weights as f32 in host memory, for the native pass.
fn host_layers(net: &LstmNet) -> Result<Arc<[LstmLayer; 2]>, String> {
    let [fast, slow] = net.recurrent().map(|layer| layer.host_weights().map_err(|e| e.to_string()));
    Ok(Arc::new([fast?, slow?]))
}

/// A tensor's elements as f32 in host memory, into `out`.
fn host_f32(t: &Tensor, out: &mut Vec<f32>) -> Result<(), String> {
    let t = t.to_device(Device::Cpu).to_kind(Kind::Float).contiguous();
    let n = t.numel();
    out.resize(n, 0.0);
    t.f_copy_data(out, n).map_err(|e| e.to_string())
}

impl Part {
    fn new(net: &LstmNet, ds: &WindowDataset, weights: Option<&Tensor>, params: &[Tensor]) -> Part {
        Part {
            net: net.replica(),
            ds: ds.shallow_clone(),
            weights: weights.map(Tensor::shallow_clone),
            params: params.iter().map(Tensor::shallow_clone).collect(),
            native: NativeLayers::new(net, params),
        }
    }

    /// The part's loss: its class-weighted sum over the batch's total weight.
    fn loss(&self, logits: &Tensor, labels: &Tensor, total: &Tensor) -> Tensor {
        let logits = logits.to_kind(Kind::Float);
        logits.cross_entropy_loss(labels, self.weights.as_ref(), tch::Reduction::Sum, -100, 0.0) / total
    }

    fn run(&self, job: &Job) -> Result<(Tensor, Vec<Tensor>), String> {
        if let (Some(native), Some(layers)) = (&self.native, &job.layers) {
            return self.run_native(native, layers, job);
        }
        let b = self.ds.batch(&job.idx);
        let loss = self.loss(&self.net.forward(&b.fast, &b.slow, &b.context), &b.labels, &job.total);
        let grads = Tensor::run_backward(&[&loss], &self.params, false, false);
        Ok((loss.detach(), grads))
    }

    /// `run` with the LSTM layers native: their last hidden states enter libtorch's graph as leaves, whose
    /// gradients the native backward pass takes to the layers' weights.
    fn run_native(
        &self,
        native: &NativeLayers,
        layers: &[LstmLayer; 2],
        job: &Job,
    ) -> Result<(Tensor, Vec<Tensor>), String> {
        let b = self.ds.batch(&job.idx);
        let batch = b.fast.size()[0];
        let mut tapes = native.tapes.borrow_mut();
        let mut input = native.input.borrow_mut();
        let mut last = Vec::with_capacity(2);
        for (((layer, w), x), tape) in
            self.net.recurrent().into_iter().zip(layers.iter()).zip([&b.fast, &b.slow]).zip(tapes.iter_mut())
        {
            host_f32(x, &mut input)?;
            let h = tape.forward(w, &input, batch as usize, x.size()[1] as usize)?;
            last.push(Tensor::from_slice(h).view([batch, layer.hidden()]).set_requires_grad(true));
        }
        let [hf, hs] = [&last[0], &last[1]].map(Tensor::shallow_clone);
        let loss = self.loss(&self.net.head_forward(hf, hs, &b.context), &b.labels, &job.total);
        let rest = self.params.iter().zip(&native.slots).filter(|(_, slot)| slot.is_none()).map(|(p, _)| p);
        let inputs: Vec<&Tensor> = rest.chain(&last).collect();
        let mut grads = Tensor::run_backward(&[&loss], &inputs, false, false);
        let dh = grads.split_off(grads.len().saturating_sub(2));
        let mut layer_grads = Vec::with_capacity(2);
        for ((tape, w), dh) in tapes.iter_mut().zip(layers.iter()).zip(&dh) {
            host_f32(dh, &mut input)?;
            let g = tape.backward(w, &input)?;
            layer_grads.push([g.w_ih, g.w_hh, g.bias.clone(), g.bias]);
        }
        let mut rest = grads.into_iter();
        let grads = self
            .params
            .iter()
            .zip(&native.slots)
            .map(|(p, slot)| match slot {
                Some((l, k)) => Tensor::from_slice(&layer_grads[*l][*k]).view(&p.size()[..]),
                None => rest.next().unwrap_or_default(),
            })
            .collect();
        Ok((loss.detach(), grads))
    }

    /// `run`, a panic (libtorch's error) turned into its message.
    fn try_run(&self, job: &Job) -> Done {
        caught(|| self.run(job))
    }
}

/// `f`'s result, a panic in it (libtorch's error) turned into its message.
fn caught<T>(f: impl FnOnce() -> Result<T, String>) -> Result<T, String> {
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)).unwrap_or_else(|p| {
        Err(p
            .downcast_ref::<String>()
            .cloned()
            .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
            .unwrap_or_else(|| "a panic without a message".into()))
    })
}

struct Worker {
    jobs: Option<Sender<Job>>,
    /// Each part's result with libtorch's threads on the worker's thread after it.
    done: Receiver<(Done, i32)>,
    thread: Option<JoinHandle<()>>,
}

/// The caller's part and the threads of the others, for the length of one `fit`.
pub(super) struct Parts {
    first: Part,
    workers: Vec<Worker>,
    /// The most libtorch threads a worker's thread has reported, once started and after each part (1).
    worker_threads: std::cell::Cell<i32>,
}

/// Makes the calling thread run libtorch with one OpenMP thread for good. libtorch sets a thread's
/// OpenMP team size from a process-wide count the first time that thread runs parallel work
/// (`at::internal::lazy_init_num_threads`): the count is 1 while this runs (`Parts::new`), and a
/// reduction over more elements than libtorch's grain size is that first parallel work.
fn one_thread_here() -> i32 {
    let _ = Tensor::ones([1 << 16], (Kind::Float, Device::Cpu)).sum(Kind::Float);
    tch::set_num_threads(1);
    tch::get_num_threads()
}

impl Parts {
    /// `n` parts: `n - 1` threads besides the caller's (none for one part), each with one OpenMP thread.
    pub(super) fn new(
        n: usize,
        net: &LstmNet,
        ds: &WindowDataset,
        weights: Option<&Tensor>,
        params: &[Tensor],
    ) -> std::io::Result<Parts> {
        // The process-wide count is 1 until every thread has taken it (`one_thread_here`), then the
        // caller's own again.
        let threads = tch::get_num_threads();
        tch::set_num_threads(1);
        let (ready_tx, ready) = channel::<i32>();
        let mut workers = Vec::new();
        for i in 1..n {
            let part = Part::new(net, ds, weights, params);
            let (jobs, job_rx) = channel::<Job>();
            let (done_tx, done) = channel::<(Done, i32)>();
            let ready_tx = ready_tx.clone();
            let spawned = std::thread::Builder::new().name(format!("lstm-part-{i}")).spawn(move || {
                let _ = ready_tx.send(one_thread_here());
                while let Ok(job) = job_rx.recv() {
                    let done = part.try_run(&job);
                    if done_tx.send((done, tch::get_num_threads())).is_err() {
                        break;
                    }
                }
            });
            match spawned {
                Ok(thread) => workers.push(Worker { jobs: Some(jobs), done, thread: Some(thread) }),
                Err(e) => {
                    tch::set_num_threads(threads);
                    return Err(e);
                }
            }
        }
        drop(ready_tx);
        let worker_threads = workers.iter().filter_map(|_| ready.recv().ok()).max().unwrap_or(1);
        tch::set_num_threads(threads);
        Ok(Parts { first: Part::new(net, ds, weights, params), workers, worker_threads: worker_threads.into() })
    }

    /// How many parts a minibatch is cut into: the caller's thread and the workers'.
    pub(super) fn count(&self) -> usize {
        self.workers.len() + 1
    }

    /// The most libtorch threads a worker's thread has reported, once started and after each part.
    #[cfg(test)]
    pub(super) fn worker_threads(&self) -> i32 {
        self.worker_threads.get()
    }

    /// The loss of the minibatch `idx` (the class-weighted mean, detached) and its gradient, one tensor
    /// per parameter in the order given to `new`.
    pub(super) fn step(&self, idx: &Tensor) -> Result<(Tensor, Vec<Tensor>), String> {
        let len = idx.size()[0];
        let n = (self.workers.len() as i64 + 1).min(len.max(1));
        let total = match &self.first.weights {
            Some(w) => {
                let labels = self.first.ds.labels.f_index_select(0, idx).map_err(|e| e.to_string())?;
                w.f_index_select(0, &labels).map_err(|e| e.to_string())?.sum(Kind::Float)
            }
            None => Tensor::from(len as f32).to_device(idx.device()),
        };
        // Contiguous parts as equal as can be: the first `len % n` one sample longer.
        let (base, extra) = (len / n, len % n);
        let span = |i: i64| (i * base + i.min(extra), base + i64::from(i < extra));
        // The layers' weights copied to host memory once for all parts (they read, never write them).
        let layers = match &self.first.native {
            Some(_) => Some(caught(|| host_layers(&self.first.net))?),
            None => None,
        };
        let job = |i: i64| {
            let (start, size) = span(i);
            Job { idx: idx.narrow(0, start, size), total: total.shallow_clone(), layers: layers.clone() }
        };
        const STOPPED: &str = "a training thread has stopped";
        // Whether each worker took its part: one that did not (its thread gone) fails the batch below.
        let sent: Vec<(&Worker, bool)> = self.workers[..(n - 1) as usize]
            .iter()
            .enumerate()
            .map(|(i, w)| (w, w.jobs.as_ref().is_some_and(|jobs| jobs.send(job(i as i64 + 1)).is_ok())))
            .collect();
        let threads = tch::get_num_threads();
        tch::set_num_threads(1);
        let first = self.first.try_run(&job(0));
        tch::set_num_threads(threads);
        // Every part sent is received before returning, so no result is left over for the next batch.
        let rest: Vec<Done> = sent
            .iter()
            .map(|(w, sent)| match sent.then(|| w.done.recv()) {
                Some(Ok((done, threads))) => {
                    self.worker_threads.set(self.worker_threads.get().max(threads));
                    done
                }
                _ => Err(STOPPED.into()),
            })
            .collect();
        let (mut loss, mut grads) = first?;
        for part in rest {
            let (l, g) = part?;
            loss += l;
            for (sum, g) in grads.iter_mut().zip(g) {
                *sum = match (sum.defined(), g.defined()) {
                    (true, true) => &*sum + g,
                    (false, _) => g,
                    (true, false) => sum.shallow_clone(),
                };
            }
        }
        Ok((loss, grads))
    }
}

impl Drop for Parts {
    fn drop(&mut self) {
        for w in &mut self.workers {
            w.jobs = None;
        }
        for w in &mut self.workers {
            if let Some(t) = w.thread.take() {
                let _ = t.join();
            }
        }
    }
}

#[cfg(test)]
mod tests;
