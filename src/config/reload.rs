//! What a SIGHUP may change while the daemon trades: the running configuration compared with the file's,
//! field by field. Every field of `Config` is named here (a new field does not compile until it has a
//! rule): the risk limits and the retrain schedule apply; any other change is refused, named as the file
//! names it.

use super::{Config, RiskConfig};
use crate::schedule::Schedule;

/// The file's configuration against the running one.
#[derive(Debug, Clone, PartialEq)]
pub struct Reload {
    /// What changed that cannot change while trading, as the file names it (`[market]`, `[retrain]
    /// budgets and gate`, ...), in the file's order.
    pub refused: Vec<String>,
    /// The new risk limits when `[risk]` changed: the daily loss limit and the kill switch's action stay
    /// as they run (they belong to the persisted kill switch).
    pub risk: Option<RiskConfig>,
    /// The new retrain schedule and whether retrains run, when either changed.
    pub schedule: Option<(Schedule, bool)>,
}

impl Config {
    /// `new` (the file re-read) compared with `self` (the running configuration).
    pub fn reload(&self, new: &Config) -> Reload {
        let Config {
            source,
            mode,
            state_dir,
            log_level,
            alpaca,
            market,
            feed,
            broker,
            risk,
            runtime,
            features,
            env,
            train,
            ppo,
            sac,
            lstm,
            retrain,
            web,
            notify,
            strategy,
            tune,
            store,
        } = new;
        let mut refused = Vec::new();
        let mut differs = |name: &str, same: bool| {
            if !same {
                refused.push(format!("[{name}]"));
            }
        };
        differs("source", self.source == *source);
        differs("mode", self.mode == *mode);
        differs("state_dir", self.state_dir == *state_dir);
        differs("log_level", self.log_level == *log_level);
        differs("alpaca", self.alpaca == *alpaca);
        differs("market", self.market == *market);
        differs("feed", self.feed == *feed);
        differs("broker", self.broker == *broker);
        differs("runtime", self.runtime == *runtime);
        differs("features", self.features == *features);
        differs("env", self.env == *env);
        differs("train", self.train == *train);
        differs("ppo", self.ppo == *ppo);
        differs("sac", self.sac == *sac);
        differs("lstm", self.lstm == *lstm);
        differs("web", self.web == *web);
        differs("notify", self.notify == *notify);
        differs("strategy", self.strategy == *strategy);
        differs("tune", self.tune == *tune);
        differs("store", self.store == *store);
        let risk = (self.risk != *risk).then(|| {
            if self.risk.daily_loss_limit_pct != risk.daily_loss_limit_pct || self.risk.kill_switch != risk.kill_switch
            {
                refused.push("risk.daily_loss_limit_pct / risk.kill_switch".into());
            }
            RiskConfig {
                daily_loss_limit_pct: self.risk.daily_loss_limit_pct,
                kill_switch: self.risk.kill_switch,
                ..risk.clone()
            }
        });
        let old = &self.retrain;
        let same_schedule =
            super::RetrainConfig { schedule: old.schedule.clone(), enabled: old.enabled, ..retrain.clone() };
        if same_schedule != *old {
            refused.push("[retrain] budgets and gate".into());
        }
        let schedule = (old.enabled != retrain.enabled || old.schedule != retrain.schedule)
            .then(|| (retrain.schedule.clone(), retrain.enabled));
        Reload { refused, risk, schedule }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    fn parse(text: &str) -> Config {
        Config::parse(Path::new("t.toml"), text).unwrap()
    }

    const BASE: &str = "[market]\nsymbols = [\"AAPL\"]\n";

    /// Each section compared as a value, not as JSON keys: risk limits and the schedule apply, the daily
    /// loss limit and another section are refused by name, and the same file changes nothing.
    #[test]
    fn a_reload_applies_limits_and_schedule_and_names_what_it_refuses() {
        let old = parse(BASE);
        assert_eq!(old.reload(&parse(BASE)), Reload { refused: vec![], risk: None, schedule: None });
        let new = parse(&format!("{BASE}[risk]\nmax_position_pct = 0.05\ndaily_loss_limit_pct = 0.01\n"));
        let r = old.reload(&new);
        assert_eq!(r.refused, vec!["risk.daily_loss_limit_pct / risk.kill_switch".to_string()]);
        let risk = r.risk.expect("the limits apply");
        assert_eq!((risk.max_position_pct, risk.daily_loss_limit_pct), (0.05, old.risk.daily_loss_limit_pct));
        let new = parse("[market]\nsymbols = [\"AAPL\", \"MSFT\"]\n[retrain]\ntimezone = \"Europe/London\"\n");
        let r = old.reload(&new);
        assert_eq!(r.refused, vec!["[market]".to_string()]);
        let (schedule, enabled) = r.schedule.expect("a new time zone is a new schedule");
        assert_eq!((schedule.zone().to_string(), enabled), ("Europe/London".to_string(), old.retrain.enabled));
        let new = parse(&format!("{BASE}[retrain]\ntime_budget_secs = 60\n"));
        assert_eq!(old.reload(&new).refused, vec!["[retrain] budgets and gate".to_string()]);
    }
}
