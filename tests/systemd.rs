//! The shipped systemd files: `systemd-analyze verify` accepts the unit (pointed at the built binary), its
//! offline security exposure stays at 3.0 or lower, and `systemd-sysusers` creates the service user from
//! the sysusers.d file into a scratch root. `make test` installs Debian's `systemd` package for the
//! tools; with `CI` set a missing tool fails the test, elsewhere the test says on stderr that it skipped.

use std::path::Path;
use std::process::Command;

/// Whether `name` runs. Missing: a failure under CI (`make test` installs it there), a skip elsewhere.
fn tool(name: &str) -> bool {
    let found = Command::new(name).arg("--version").output().map(|o| o.status.success()).unwrap_or(false);
    if !found {
        assert!(
            std::env::var_os("CI").is_none(),
            "{name} is missing and CI is set: `make test` installs it (Debian's systemd package: apt-get install systemd)"
        );
        eprintln!("SKIPPED: {name} is not installed (Debian's systemd package; `make test` installs it)");
    }
    found
}

fn unit_for_this_build(dir: &Path) -> std::path::PathBuf {
    let text = std::fs::read_to_string("systemd/tradebot.service").unwrap();
    assert!(text.contains("ExecStart=/usr/local/bin/tradebot run --config /etc/tradebot/tradebot.toml"));
    let p = dir.join("tradebot.service");
    std::fs::write(&p, text.replace("/usr/local/bin/tradebot", env!("CARGO_BIN_EXE_tradebot"))).unwrap();
    p
}

#[test]
fn unit_verifies() {
    if !tool("systemd-analyze") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let unit = unit_for_this_build(dir.path());
    let out = Command::new("systemd-analyze").arg("verify").arg(&unit).output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "systemd-analyze verify failed:\n{stderr}");
    let about_unit: Vec<&str> = stderr.lines().filter(|l| l.contains("tradebot.service")).collect();
    assert!(about_unit.is_empty(), "systemd-analyze verify complained:\n{}", about_unit.join("\n"));
}

#[test]
fn unit_exposure_is_at_most_3() {
    if !tool("systemd-analyze") {
        return;
    }
    let out = Command::new("systemd-analyze")
        .args(["security", "--offline=true", "--no-pager", "systemd/tradebot.service"])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    let line = text.lines().find(|l| l.contains("Overall exposure level")).unwrap_or_else(|| {
        panic!("no exposure level in systemd-analyze security output:\n{text}{}", String::from_utf8_lossy(&out.stderr))
    });
    let score: f64 = line
        .split(':')
        .nth(1)
        .and_then(|r| r.split_whitespace().next())
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("cannot read the score in {line:?}"));
    assert!(score <= 3.0, "exposure {score} > 3.0: {line}");
    let readme = std::fs::read_to_string("README.md").unwrap();
    assert!(
        readme.contains(&format!("exposure level {score:.1}")),
        "README must state the unit's exposure level {score:.1}"
    );
}

#[test]
fn sysusers_creates_the_service_user() {
    if !tool("systemd-sysusers") {
        return;
    }
    let root = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(root.path().join("etc")).unwrap();
    let file = std::fs::canonicalize("systemd/tradebot.sysusers").unwrap();
    let out =
        Command::new("systemd-sysusers").arg(format!("--root={}", root.path().display())).arg(&file).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let passwd = std::fs::read_to_string(root.path().join("etc/passwd")).unwrap();
    let user = passwd.lines().find(|l| l.starts_with("tradebot:")).expect("no tradebot user created");
    // name:password:uid:gid:gecos:home:shell. A system user (uid below 1000) that cannot log in.
    let fields: Vec<&str> = user.split(':').collect();
    assert_eq!(fields.len(), 7, "{user}");
    assert_eq!(fields[5], "/var/lib/tradebot", "home: {user}");
    assert!(fields[6].ends_with("/nologin"), "shell: {user}");
    assert!(fields[2].parse::<u32>().is_ok_and(|uid| uid < 1000), "a system uid: {user}");
    let unit = std::fs::read_to_string("systemd/tradebot.service").unwrap();
    assert!(unit.contains("User=tradebot") && unit.contains("StateDirectory=tradebot"));
}

/// The exits that need a person are the ones the unit does not restart into, and the soft limit the daemon
/// raises at start has a hard one to reach.
#[test]
fn the_unit_does_not_restart_into_exits_that_need_a_person() {
    let unit = std::fs::read_to_string("systemd/tradebot.service").unwrap();
    let line = unit.lines().find(|l| l.starts_with("RestartPreventExitStatus=")).expect("RestartPreventExitStatus=");
    let mut codes: Vec<u8> = line["RestartPreventExitStatus=".len()..]
        .split_whitespace()
        .map(|c| c.parse().unwrap_or_else(|_| panic!("{line}")))
        .collect();
    codes.sort_unstable();
    // A damaged store, an unusable state directory, a store that cannot write (a full disk), a bad config
    // or refused keys.
    let io_error = 74;
    let want = [tradebot::store::EX_STORE, tradebot::EX_CANTCREAT, io_error, tradebot::EX_CONFIG];
    assert_eq!(codes, want, "{line}");
    let nofile = unit.lines().find_map(|l| l.strip_prefix("LimitNOFILE=")).expect("LimitNOFILE= in the unit");
    assert!(nofile.parse::<u64>().is_ok_and(|n| n >= 4096), "LimitNOFILE={nofile}");
}
