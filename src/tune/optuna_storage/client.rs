//! A blocking client of Optuna's storage service over gRPC (`grpc://host:port`, the proxy that
//! `optuna.storages.run_grpc_proxy_server` serves). Each call waits out an unreachable proxy (a restart) with
//! backoff, up to `Client::patience`; any other refusal comes back at once as a [`StorageError`]. A trial is
//! created with a token among its system attributes, so that a creation whose answer was lost is found again
//! rather than made twice.

use super::StorageError;
use super::messages::{self as m, method};
use std::cell::Cell;
use std::time::{Duration, Instant};
use tonic::Code;
use tonic::transport::{Channel, Endpoint};

thread_local! {
    /// This thread's time in storage calls (their backoff included) and its calls: [`waited_here`].
    static WAITED: Cell<(Duration, u64)> = const { Cell::new((Duration::ZERO, 0)) };
}

/// The time this thread has spent waiting on the storage (calls and their backoff while the proxy is
/// away) and the calls it made, since it started: a worker's trials measure their storage share with it,
/// apart from the heartbeat's thread, whose writes no trial waits for.
pub(crate) fn waited_here() -> (Duration, u64) {
    WAITED.with(Cell::get)
}

fn count_wait(d: Duration, calls: u64) {
    WAITED.with(|w| {
        let (t, n) = w.get();
        w.set((t + d, n + calls));
    });
}

/// The system attribute that names a trial's creator (a random token per trial).
pub(crate) const TOKEN_ATTR: &str = "tradebot:token";

pub(crate) struct Client {
    rt: tokio::runtime::Runtime,
    channel: Channel,
    /// `grpc://host:port`, for messages.
    pub url: String,
    /// How long a call waits for an unreachable proxy before giving up.
    pub patience: Duration,
    /// When (Unix seconds) the proxy last answered again after being unreachable.
    back_at: std::sync::Mutex<Option<f64>>,
}

impl Client {
    /// A client of the proxy at `url` (`grpc://host:port`). Connects on the first call.
    pub(crate) fn new(url: &str) -> Result<Client, StorageError> {
        let bad = |why: &str| StorageError::BadUrl { url: url.into(), why: why.into() };
        let rest = url.strip_prefix("grpc://").ok_or_else(|| bad("it must start with grpc://"))?;
        let rest = rest.trim_end_matches('/');
        let (host, port) = rest.rsplit_once(':').ok_or_else(|| bad("it must name a port: grpc://host:port"))?;
        if host.is_empty() || port.parse::<u16>().is_err() {
            return Err(bad("it must be grpc://host:port with a port number"));
        }
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .thread_name("optuna-storage")
            .enable_all()
            .build()
            .map_err(|e| StorageError::Io { why: format!("starting the client's runtime: {e}") })?;
        let endpoint = Endpoint::from_shared(format!("http://{rest}"))
            .map_err(|e| bad(&e.to_string()))?
            .connect_timeout(Duration::from_secs(5))
            .timeout(Duration::from_secs(60));
        let channel = {
            let _in = rt.enter();
            endpoint.connect_lazy()
        };
        Ok(Client { rt, channel, url: url.into(), patience: Duration::from_secs(120), back_at: Default::default() })
    }

    /// One call, once.
    fn once<Q, R>(&self, path: &'static str, req: Q) -> Result<R, tonic::Status>
    where
        Q: prost::Message + Send + Sync + 'static,
        R: prost::Message + Default + Send + Sync + 'static,
    {
        let started = Instant::now();
        let mut grpc = tonic::client::Grpc::new(self.channel.clone());
        let r = self.rt.block_on(async move {
            grpc.ready().await.map_err(|e| tonic::Status::unavailable(e.to_string()))?;
            let codec = tonic_prost::ProstCodec::<Q, R>::default();
            let path = tonic::codegen::http::uri::PathAndQuery::from_static(path);
            grpc.unary(tonic::Request::new(req), path, codec).await.map(tonic::Response::into_inner)
        });
        count_wait(started.elapsed(), 1);
        r
    }

    /// One call, retried with backoff while the proxy is unreachable. `again` runs before each retry (after
    /// the proxy answers again); where it returns an answer, that is the call's answer.
    fn call_with<Q, R>(
        &self,
        path: &'static str,
        req: Q,
        mut again: impl FnMut(&Client) -> Option<R>,
    ) -> Result<R, StorageError>
    where
        Q: prost::Message + Clone + Send + Sync + 'static,
        R: prost::Message + Default + Send + Sync + 'static,
    {
        let started = Instant::now();
        let mut wait = Duration::from_millis(50);
        let mut warned = false;
        let mut retried = false;
        loop {
            if retried && let Some(r) = again(self) {
                return Ok(r);
            }
            match self.once(path, req.clone()) {
                Ok(r) => {
                    if warned {
                        log::info!("Optuna storage {} answers again", self.url);
                        if let Ok(mut b) = self.back_at.lock() {
                            *b = Some(super::unix_now());
                        }
                    }
                    return Ok(r);
                }
                Err(s) if retryable(&s) && started.elapsed() < self.patience => {
                    if !warned {
                        log::warn!(
                            "Optuna storage {} unreachable ({}): retrying for up to {}s",
                            self.url,
                            s.message(),
                            self.patience.as_secs()
                        );
                        warned = true;
                    }
                    std::thread::sleep(wait);
                    count_wait(wait, 0);
                    wait = (wait * 2).min(Duration::from_secs(2));
                    retried = true;
                }
                Err(s) => {
                    let away = retryable(&s);
                    return Err(StorageError::from_status(&self.url, call_name(path), s, away, started.elapsed()));
                }
            }
        }
    }

    fn call<Q, R>(&self, path: &'static str, req: Q) -> Result<R, StorageError>
    where
        Q: prost::Message + Clone + Send + Sync + 'static,
        R: prost::Message + Default + Send + Sync + 'static,
    {
        self.call_with(path, req, |_| None)
    }

    /// When (Unix seconds) the proxy last answered again after being unreachable: no heartbeat could be
    /// written while it was away, so none is judged late from before then.
    pub(crate) fn back_at(&self) -> Option<f64> {
        self.back_at.lock().ok().and_then(|b| *b)
    }

    /// The study's id, or `None` where no study has that name.
    pub(crate) fn study_id(&self, name: &str) -> Result<Option<i64>, StorageError> {
        let req = m::StudyNameRequest { study_name: name.into() };
        match self.call::<_, m::StudyIdReply>(method::GET_STUDY_ID_FROM_NAME, req) {
            Ok(r) => Ok(Some(r.study_id)),
            Err(StorageError::NotFound { .. }) => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// Creates a study maximising its one objective; `None` where another worker created it first.
    pub(crate) fn create_study(&self, name: &str) -> Result<Option<i64>, StorageError> {
        let req = m::CreateNewStudyRequest { directions: vec![m::MAXIMIZE], study_name: name.into() };
        let found = |c: &Client| c.study_id(name).ok().flatten().map(|study_id| m::StudyIdReply { study_id });
        match self.call_with::<_, m::StudyIdReply>(method::CREATE_NEW_STUDY, req, found) {
            Ok(r) => Ok(Some(r.study_id)),
            Err(StorageError::AlreadyExists { .. }) => Ok(None),
            Err(e) => Err(e),
        }
    }

    pub(crate) fn directions(&self, study_id: i64) -> Result<Vec<i32>, StorageError> {
        let r: m::DirectionsReply = self.call(method::GET_STUDY_DIRECTIONS, m::StudyIdRequest { study_id })?;
        Ok(r.directions)
    }

    pub(crate) fn study_system_attrs(
        &self,
        study_id: i64,
    ) -> Result<std::collections::HashMap<String, String>, StorageError> {
        let r: m::AttributesReply = self.call(method::GET_STUDY_SYSTEM_ATTRIBUTES, m::StudyIdRequest { study_id })?;
        Ok(r.attributes)
    }

    /// Sets a study's system attribute to `value` (JSON).
    pub(crate) fn set_study_system_attr(
        &self,
        study_id: i64,
        key: &str,
        value: &serde_json::Value,
    ) -> Result<(), StorageError> {
        let req = m::StudyAttributeRequest { study_id, key: key.into(), value: value.to_string() };
        self.call::<_, m::Empty>(method::SET_STUDY_SYSTEM_ATTRIBUTE, req).map(|_| ())
    }

    pub(crate) fn studies(&self) -> Result<Vec<m::Study>, StorageError> {
        let r: m::AllStudiesReply = self.call(method::GET_ALL_STUDIES, m::Empty {})?;
        Ok(r.studies)
    }

    /// Every trial of the study, in their ids' order.
    pub(crate) fn trials(&self, study_id: i64) -> Result<Vec<m::Trial>, StorageError> {
        let req = m::GetTrialsRequest { study_id, included_trial_ids: Vec::new(), trial_id_greater_than: -1 };
        let mut t = self.call::<_, m::TrialsReply>(method::GET_TRIALS, req)?.trials;
        t.sort_by_key(|t| t.trial_id);
        Ok(t)
    }

    pub(crate) fn trial(&self, trial_id: i64) -> Result<m::Trial, StorageError> {
        let r: m::TrialReply = self.call(method::GET_TRIAL, m::TrialIdMessage { trial_id })?;
        r.trial.ok_or_else(|| StorageError::Malformed {
            what: format!("trial {trial_id}"),
            why: "no trial in the answer".into(),
        })
    }

    /// Creates a running trial (started now, with `system_attrs` as JSON values and a fresh token); returns it
    /// as stored (its id and number). A creation whose answer was lost to a proxy restart is found by its
    /// token instead of being made again.
    pub(crate) fn create_trial(
        &self,
        study_id: i64,
        system_attrs: &[(&str, serde_json::Value)],
    ) -> Result<m::Trial, StorageError> {
        let token = format!("{:016x}{:016x}", rand::random::<u64>(), rand::random::<u64>());
        let mut attrs: std::collections::HashMap<String, String> =
            system_attrs.iter().map(|(k, v)| ((*k).to_string(), v.to_string())).collect();
        let token_json = serde_json::Value::String(token).to_string();
        attrs.insert(TOKEN_ATTR.into(), token_json.clone());
        let template = m::Trial {
            state: m::state::RUNNING,
            datetime_start: time(chrono::Utc::now()),
            system_attributes: attrs,
            ..Default::default()
        };
        let req = m::CreateNewTrialRequest { study_id, template_trial: Some(template), template_trial_is_none: false };
        let mine = |c: &Client| {
            let all = c.trials(study_id).ok()?;
            let t = all.into_iter().find(|t| t.system_attributes.get(TOKEN_ATTR) == Some(&token_json))?;
            log::info!("trial {} was created before the storage went away: kept, not created again", t.number);
            Some(m::TrialIdMessage { trial_id: t.trial_id })
        };
        let id: m::TrialIdMessage = self.call_with(method::CREATE_NEW_TRIAL, req, mine)?;
        self.trial(id.trial_id)
    }

    /// Sets a parameter (its internal number and its distribution's JSON).
    pub(crate) fn set_param(
        &self,
        trial_id: i64,
        name: &str,
        internal: f64,
        distribution: &str,
    ) -> Result<(), StorageError> {
        let req = m::SetTrialParameterRequest {
            trial_id,
            param_name: name.into(),
            param_value_internal: internal,
            distribution: distribution.into(),
        };
        // Set already (an answer lost to a restart): the same value is there.
        let there = |c: &Client| {
            let t = c.trial(trial_id).ok()?;
            (t.params.get(name) == Some(&internal)).then_some(m::Empty {})
        };
        self.call_with::<_, m::Empty>(method::SET_TRIAL_PARAMETER, req, there).map(|_| ())
    }

    pub(crate) fn set_intermediate(&self, trial_id: i64, step: i64, value: f64) -> Result<(), StorageError> {
        let req = m::SetTrialIntermediateValueRequest { trial_id, step, intermediate_value: value };
        self.call::<_, m::Empty>(method::SET_TRIAL_INTERMEDIATE_VALUE, req).map(|_| ())
    }

    pub(crate) fn set_user_attr(
        &self,
        trial_id: i64,
        key: &str,
        value: &serde_json::Value,
    ) -> Result<(), StorageError> {
        let req = m::TrialAttributeRequest { trial_id, key: key.into(), value: value.to_string() };
        self.call::<_, m::Empty>(method::SET_TRIAL_USER_ATTRIBUTE, req).map(|_| ())
    }

    pub(crate) fn set_system_attr(
        &self,
        trial_id: i64,
        key: &str,
        value: &serde_json::Value,
    ) -> Result<(), StorageError> {
        let req = m::TrialAttributeRequest { trial_id, key: key.into(), value: value.to_string() };
        self.call::<_, m::Empty>(method::SET_TRIAL_SYSTEM_ATTRIBUTE, req).map(|_| ())
    }

    /// Ends a trial in `state` (with its value where complete). `false` where the trial had ended already
    /// (another worker failed it, or this call's first answer was lost and it is in that state now).
    pub(crate) fn finish(&self, trial_id: i64, state: i32, value: Option<f64>) -> Result<bool, StorageError> {
        let req = m::SetTrialStateValuesRequest { trial_id, state, values: value.into_iter().collect() };
        let done = |c: &Client| {
            let t = c.trial(trial_id).ok()?;
            (t.state == state).then_some(m::SetTrialStateValuesReply { trial_updated: true })
        };
        match self.call_with::<_, m::SetTrialStateValuesReply>(method::SET_TRIAL_STATE_VALUES, req, done) {
            Ok(r) => Ok(r.trial_updated),
            Err(StorageError::Refused { code: Code::FailedPrecondition, .. }) => Ok(false),
            Err(e) => Err(e),
        }
    }
}

/// Optuna's time format on the wire (UTC here).
pub(crate) fn time(t: chrono::DateTime<chrono::Utc>) -> String {
    t.format("%Y-%m-%d %H:%M:%S%.6f").to_string()
}

/// The storage is away (restarting) rather than refusing.
fn retryable(s: &tonic::Status) -> bool {
    match s.code() {
        Code::Unavailable => true,
        // A connection cut mid-call (the proxy killed while answering).
        Code::Unknown | Code::Internal | Code::Cancelled => {
            let m = s.message();
            m.contains("transport") || m.contains("connect") || m.contains("h2") || m.contains("reset")
        }
        _ => false,
    }
}

fn call_name(path: &str) -> &str {
    path.rsplit('/').next().unwrap_or(path)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_storage_url_must_be_grpc_host_port() {
        for (url, why) in [
            ("http://127.0.0.1:13000", "it must start with grpc://"),
            ("grpc://127.0.0.1", "it must name a port"),
            ("grpc://127.0.0.1:port", "with a port number"),
        ] {
            let e = Client::new(url).err().map(|e| e.to_string()).unwrap_or_default();
            assert!(e.contains(url) && e.contains(why), "{url}: {e}");
        }
        assert!(Client::new("grpc://127.0.0.1:13000/").is_ok());
    }

    /// Nothing listening: the call retries for its patience, then says where it looked and what to check.
    #[test]
    fn an_unreachable_proxy_is_waited_for_then_named() {
        let port = std::net::TcpListener::bind("127.0.0.1:0").and_then(|l| l.local_addr()).map(|a| a.port()).unwrap();
        let mut c = Client::new(&format!("grpc://127.0.0.1:{port}")).unwrap();
        c.patience = Duration::from_millis(600);
        let started = Instant::now();
        let e = c.study_id("s").unwrap_err();
        assert!(started.elapsed() >= Duration::from_millis(600), "gave up after {:?}", started.elapsed());
        assert!(matches!(e, StorageError::Unreachable { .. }), "{e:?}");
        let e = e.to_string();
        assert!(e.contains(&format!("grpc://127.0.0.1:{port}")) && e.contains("is the proxy running"), "{e}");
    }

    /// A thread's storage calls and backoff are counted for that thread alone (the heartbeat's thread
    /// does not add to a trial's storage share).
    #[test]
    fn time_waiting_on_the_storage_is_counted_per_thread() {
        let port = std::net::TcpListener::bind("127.0.0.1:0").and_then(|l| l.local_addr()).map(|a| a.port()).unwrap();
        let mut c = Client::new(&format!("grpc://127.0.0.1:{port}")).unwrap();
        c.patience = Duration::from_millis(300);
        let c = std::sync::Arc::new(c);
        let before = waited_here();
        let other = std::thread::spawn({
            let c = c.clone();
            move || {
                let started = Instant::now();
                let _ = c.study_id("s");
                (started.elapsed(), waited_here())
            }
        });
        let (took, (waited, calls)) = other.join().unwrap();
        assert!(calls >= 2, "{calls} calls counted: the first try and at least one retry");
        assert!(waited >= Duration::from_millis(300) && waited <= took, "waited {waited:?} of {took:?}");
        assert_eq!(waited_here(), before, "another thread's calls were counted here");
    }
}
