//! Every argument and every subcommand of the whole command tree says what it is (`--help`), so that no
//! flag is a guess.

use super::Cli;
use clap::{Arg, Command, CommandFactory};

/// How `--help` shows an argument: `--json`, `-c/--config`, `<ID>`.
fn shown(a: &Arg) -> String {
    match (a.get_short(), a.get_long()) {
        (Some(s), Some(l)) => format!("-{s}/--{l}"),
        (None, Some(l)) => format!("--{l}"),
        (Some(s), None) => format!("-{s}"),
        (None, None) => format!("<{}>", a.get_id().as_str().to_uppercase()),
    }
}

fn blank(s: Option<&clap::builder::StyledStr>) -> bool {
    s.is_none_or(|s| s.to_string().trim().is_empty())
}

/// "tradebot models list --json" for each argument without help, "tradebot bench: no about" for each
/// subcommand without a description, anywhere under `cmd`.
fn undocumented(cmd: &Command, path: &str, found: &mut Vec<String>) {
    for a in cmd.get_arguments() {
        if matches!(a.get_id().as_str(), "help" | "version") {
            continue;
        }
        if blank(a.get_help()) && blank(a.get_long_help()) {
            found.push(format!("{path} {}", shown(a)));
        }
    }
    for sub in cmd.get_subcommands() {
        let sub_path = format!("{path} {}", sub.get_name());
        if blank(sub.get_about()) && blank(sub.get_long_about()) {
            found.push(format!("{sub_path}: no about"));
        }
        undocumented(sub, &sub_path, found);
    }
}

#[test]
fn every_argument_and_subcommand_has_help() {
    let mut found = Vec::new();
    undocumented(&Cli::command(), "tradebot", &mut found);
    assert!(found.is_empty(), "{} without help text:\n{}", found.len(), found.join("\n"));
}

#[test]
fn the_walk_finds_an_argument_without_help() {
    // The check itself: a tree with one bare flag and one bare subcommand is refused, by name.
    let cmd = Command::new("t")
        .about("a tree")
        .subcommand(Command::new("s").arg(Arg::new("json").long("json").action(clap::ArgAction::SetTrue)));
    let mut found = Vec::new();
    undocumented(&cmd, "t", &mut found);
    assert_eq!(found, ["t s: no about", "t s --json"]);
}
