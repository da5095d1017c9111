//! The shipped systemd files: `systemd-analyze verify` accepts the unit (pointed at the built binary), its
//! offline security exposure stays at 3.0 or lower, and `systemd-sysusers` creates the service user from
//! the sysusers.d file into a scratch root. Each check runs where the tool is installed (Debian CI has
//! systemd) and says so on stderr where it is not.

use std::path::Path;
use std::process::Command;

fn tool(name: &str) -> bool {
    Command::new(name).arg("--version").output().map(|o| o.status.success()).unwrap_or(false)
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
        eprintln!("systemd-analyze is not installed: unit verification skipped");
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
        eprintln!("systemd-analyze is not installed: security score skipped");
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
        eprintln!("systemd-sysusers is not installed: sysusers check skipped");
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
    assert!(user.ends_with(":/var/lib/tradebot:/usr/sbin/nologin") || user.contains(":/var/lib/tradebot:"), "{user}");
    let unit = std::fs::read_to_string("systemd/tradebot.service").unwrap();
    assert!(unit.contains("User=tradebot") && unit.contains("StateDirectory=tradebot"));
}
