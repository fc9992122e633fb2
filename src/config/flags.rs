//! gflags-style command-line parsing for the binaries: `-name`, `--name`, `=value` or a
//! separate value, `--name`/`--noname` for booleans, `--flagfile`-free.

use std::collections::HashMap;
use std::fmt;

/// Why a flag could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FlagError {
    /// A value flag came last, without its value.
    #[error("flag --{name} needs a value")]
    MissingValue {
        /// The flag.
        name: String,
    },
    /// A flag's value does not parse as the flag's type.
    #[error("{}", problem.describe(name, value))]
    BadValue {
        /// The flag.
        name: String,
        /// The value as given.
        value: String,
        /// What is wrong with it.
        problem: Problem,
    },
}

/// What is wrong with a flag's value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Problem {
    /// Not a gflags boolean.
    NotBool,
    /// Not a number of the flag's type.
    NotNumber,
    /// A byte size with a unit that is not `B`, `K…`, `M…`, `G…` or `T…`.
    UnknownUnit,
    /// A byte size beyond `u64`.
    TooLarge,
    /// Not a byte size at all.
    NotSize,
}

impl Problem {
    fn describe(self, name: &str, v: &str) -> String {
        match self {
            Problem::NotBool => format!("flag --{name}: '{v}' is not a boolean"),
            Problem::NotNumber => format!("--{name}: {v:?} is not a valid number"),
            Problem::UnknownUnit => format!("--{name}: '{v}' has an unknown unit"),
            Problem::TooLarge => format!("--{name}: '{v}' is too large"),
            Problem::NotSize => format!("--{name}: '{v}' is not a size"),
        }
    }
}

impl FlagError {
    fn bad(name: &str, value: &str, problem: Problem) -> FlagError {
        FlagError::BadValue {
            name: name.to_string(),
            value: value.to_string(),
            problem,
        }
    }
}

/// The binaries keep their errors as text.
impl From<FlagError> for String {
    fn from(e: FlagError) -> String {
        e.to_string()
    }
}

/// Whether a flag takes a value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FlagKind {
    /// `--name`, `--noname`, `--name=true|false|1|0|yes|no`.
    Bool,
    /// `--name=value` or `--name value`.
    Value,
}

/// How `name` is parsed, from a table of `(flag name, is boolean)`; `None` when the
/// table does not have it.
pub fn kind_in(table: &[(&str, bool)], name: &str) -> Option<FlagKind> {
    table
        .iter()
        .find(|(n, _)| *n == name)
        .map(|&(_, b)| if b { FlagKind::Bool } else { FlagKind::Value })
}

/// Parsed flags: the last occurrence of each name wins; booleans are `"true"`/`"false"`.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Flags {
    values: HashMap<String, String>,
    /// Names that were given but are not in the spec (upstream flags we do not implement).
    pub unknown: Vec<String>,
    /// Arguments that are not flags.
    pub positional: Vec<String>,
}

impl Flags {
    /// Parses `args` (without the program name) against `spec`; `kind_of` says how each
    /// known flag is parsed, `None` for unknown flags (kept in [`Flags::unknown`]).
    pub fn parse(
        args: impl IntoIterator<Item = String>,
        kind_of: impl Fn(&str) -> Option<FlagKind>,
    ) -> Result<Flags, FlagError> {
        let mut flags = Flags::default();
        let mut args = args.into_iter().peekable();
        while let Some(arg) = args.next() {
            let Some(body) = arg.strip_prefix("--").or_else(|| arg.strip_prefix('-')) else {
                flags.positional.push(arg);
                continue;
            };
            if body.is_empty() {
                flags.positional.extend(args.by_ref());
                break;
            }
            let (name, inline) = match body.split_once('=') {
                Some((n, v)) => (n.to_string(), Some(v.to_string())),
                None => (body.to_string(), None),
            };
            match (kind_of(&name), inline) {
                (Some(FlagKind::Bool), Some(v)) => {
                    flags
                        .values
                        .insert(name.clone(), parse_bool(&name, &v)?.to_string());
                }
                (Some(FlagKind::Bool), None) => {
                    flags.values.insert(name, "true".into());
                }
                (Some(FlagKind::Value), Some(v)) => {
                    flags.values.insert(name, v);
                }
                (Some(FlagKind::Value), None) => {
                    let v = args
                        .next()
                        .ok_or_else(|| FlagError::MissingValue { name: name.clone() })?;
                    flags.values.insert(name, v);
                }
                (None, inline) => match name.strip_prefix("no") {
                    Some(base) if inline.is_none() && kind_of(base) == Some(FlagKind::Bool) => {
                        flags.values.insert(base.to_string(), "false".into());
                    }
                    _ => {
                        // An unknown flag may carry a separate value: swallow it when the
                        // next argument is not a flag, so it is not taken as positional.
                        if inline.is_none() && args.peek().is_some_and(|a| !a.starts_with('-')) {
                            args.next();
                        }
                        flags.unknown.push(name);
                    }
                },
            }
        }
        Ok(flags)
    }

    /// The value of a flag, if given.
    pub fn get(&self, name: &str) -> Option<&str> {
        self.values.get(name).map(String::as_str)
    }

    /// The value of a numeric flag, `default` when not given.
    pub fn number<T: std::str::FromStr>(&self, name: &str, default: T) -> Result<T, FlagError> {
        match self.get(name) {
            None => Ok(default),
            Some(v) => v
                .trim()
                .parse()
                .map_err(|_| FlagError::bad(name, v, Problem::NotNumber)),
        }
    }

    /// Every given (name, value) pair.
    pub fn iter(&self) -> impl Iterator<Item = (&str, &str)> {
        self.values.iter().map(|(k, v)| (k.as_str(), v.as_str()))
    }
}

/// What a command line asks for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Parsed<T> {
    /// A run with these settings.
    Run(T),
    /// The usage text (`--help`).
    Help,
}

/// What a binary's `main` takes from its parsed command line: the run's settings, or
/// else the exit status after printing `usage` on stdout (`--help`: 0) or
/// `refusal(error)` on stderr (a command line that is wrong: 2).
pub fn run_or_exit<T, E: fmt::Display>(
    parsed: Result<Parsed<T>, E>,
    usage: &str,
    refusal: impl FnOnce(&str) -> String,
) -> Result<T, std::process::ExitCode> {
    use std::process::ExitCode;
    match parsed {
        Ok(Parsed::Run(settings)) => Ok(settings),
        Ok(Parsed::Help) => {
            println!("{usage}");
            Err(ExitCode::SUCCESS)
        }
        Err(e) => {
            eprintln!("{}", refusal(&e.to_string()));
            Err(ExitCode::from(2))
        }
    }
}

/// The `main` of a gflags-style binary: installs the stderr logger
/// ([`crate::host::logger`]), parses the command line against `kind_of`,
/// prints `usage` for `--help` (or `-h` when it is a known flag), warns about unknown
/// flags, builds the settings (exit status 2 with the usage when they are wrong) and
/// runs (exit status 1 with `name: error` when that fails, see [`exit_status`]).
pub fn run_main<S, E: fmt::Display, F: fmt::Display>(
    name: &str,
    usage: &str,
    kind_of: impl Fn(&str) -> Option<FlagKind>,
    settings: impl FnOnce(&Flags) -> Result<S, E>,
    run: impl FnOnce(S) -> Result<(), F>,
) -> std::process::ExitCode {
    crate::host::logger::install();
    let parsed = Flags::parse(std::env::args().skip(1), kind_of)
        .map_err(|e| e.to_string())
        .and_then(|flags| {
            if flags.get("help") == Some("true") || flags.get("h") == Some("true") {
                return Ok(Parsed::Help);
            }
            for flag in &flags.unknown {
                log::warn!("unknown flag --{flag}; ignored");
            }
            settings(&flags).map(Parsed::Run).map_err(|e| e.to_string())
        });
    let settings = match run_or_exit(parsed, usage, |e| format!("{e}\n{usage}")) {
        Ok(s) => s,
        Err(code) => return code,
    };
    exit_status(run(settings), name)
}

/// The exit status of a binary's run: 0, or else 1 after printing `prefix: error` on
/// stderr.
pub fn exit_status<E: fmt::Display>(result: Result<(), E>, prefix: &str) -> std::process::ExitCode {
    use std::process::ExitCode;
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("{prefix}: {e}");
            ExitCode::from(1)
        }
    }
}

/// The settings a binary builds from literal arguments (without the program name), as
/// [`run_main`] builds them from the command line but without its `--help` and
/// unknown-flag handling: how the binaries' tests read their flags.
pub fn settings_from<S, E>(
    args: &[&str],
    kind_of: impl Fn(&str) -> Option<FlagKind>,
    settings: impl FnOnce(&Flags) -> Result<S, E>,
) -> Result<S, SettingsError<E>> {
    let flags =
        Flags::parse(args.iter().map(|a| a.to_string()), kind_of).map_err(SettingsError::Flags)?;
    settings(&flags).map_err(SettingsError::Settings)
}

/// Why [`settings_from`] gave no settings: the arguments are not a command line, or the
/// binary refused the flags they give.
#[derive(Debug, thiserror::Error)]
pub enum SettingsError<E> {
    /// The arguments do not parse as flags.
    #[error("{0}")]
    Flags(FlagError),
    /// The binary's settings refused them (its own error).
    #[error("{0}")]
    Settings(E),
}

/// Parses a gflags boolean value.
pub fn parse_bool(name: &str, v: &str) -> Result<bool, FlagError> {
    match v.trim().to_ascii_lowercase().as_str() {
        "true" | "1" | "yes" | "y" | "t" => Ok(true),
        "false" | "0" | "no" | "n" | "f" => Ok(false),
        _ => Err(FlagError::bad(name, v, Problem::NotBool)),
    }
}

/// Parses a byte size as upstream's flags take it: a number (a decimal fraction
/// allowed) and an optional unit `B`, `K`/`KB`/`KiB`, `M…`, `G…`, `T…` (powers of
/// 1024, any case, spaces allowed: `"4 GB"`, `512MB`, `1.5g`).
pub fn parse_byte_size(name: &str, v: &str) -> Result<u64, FlagError> {
    let t = v.trim();
    let split = t
        .find(|c: char| !c.is_ascii_digit() && c != '.')
        .unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let shift = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 0,
        "k" | "kb" | "kib" => 10,
        "m" | "mb" | "mib" => 20,
        "g" | "gb" | "gib" => 30,
        "t" | "tb" | "tib" => 40,
        _ => return Err(FlagError::bad(name, v, Problem::UnknownUnit)),
    };
    let too_large = || FlagError::bad(name, v, Problem::TooLarge);
    if let Ok(n) = num.parse::<u64>() {
        return n.checked_mul(1u64 << shift).ok_or_else(too_large);
    }
    match num.parse::<f64>() {
        Ok(x) if x.is_finite() && x >= 0.0 && !num.is_empty() => {
            let bytes = x * (1u64 << shift) as f64;
            if bytes >= u64::MAX as f64 {
                return Err(too_large());
            }
            Ok(bytes as u64)
        }
        _ => Err(FlagError::bad(name, v, Problem::NotSize)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kind(name: &str) -> Option<FlagKind> {
        match name {
            "port" | "rpc_address" => Some(FlagKind::Value),
            "enable_x" => Some(FlagKind::Bool),
            _ => None,
        }
    }

    fn parse(args: &[&str]) -> Result<Flags, FlagError> {
        Flags::parse(args.iter().map(|s| s.to_string()), kind)
    }

    #[test]
    fn byte_sizes_as_upstream_writes_them() {
        assert_eq!(parse_byte_size("s", "4 GB"), Ok(4 << 30));
        assert_eq!(parse_byte_size("s", "512MB"), Ok(512 << 20));
        assert_eq!(parse_byte_size("s", "0"), Ok(0));
        assert_eq!(parse_byte_size("s", "1.5g"), Ok(3 << 29));
        assert_eq!(parse_byte_size("s", "16 KiB"), Ok(16 << 10));
        assert_eq!(parse_byte_size("s", "123"), Ok(123));
        assert!(parse_byte_size("s", "4 XB").is_err());
        assert!(parse_byte_size("s", "GB").is_err());
        assert!(parse_byte_size("s", "99999999999 TB").is_err());
    }

    #[test]
    fn gflags_forms() {
        let f = parse(&["-port=1", "--rpc_address", "h", "--enable_x"]).unwrap();
        assert_eq!(f.get("port"), Some("1"));
        assert_eq!(f.get("rpc_address"), Some("h"));
        assert_eq!(f.get("enable_x"), Some("true"));
        let f = parse(&["--noenable_x", "--port", "2", "--port=3"]).unwrap();
        assert_eq!(f.get("enable_x"), Some("false"));
        assert_eq!(f.get("port"), Some("3"));
        let f = parse(&["--enable_x=false"]).unwrap();
        assert_eq!(f.get("enable_x"), Some("false"));
        assert!(parse(&["--enable_x=maybe"]).is_err());
        assert!(parse(&["--port"]).is_err());
    }

    #[test]
    fn unknown_flags_are_collected_with_their_values() {
        let f = parse(&[
            "--enable_ha",
            "true",
            "--cluster_id=x",
            "pos",
            "--",
            "--port",
        ])
        .unwrap();
        assert_eq!(
            f.unknown,
            vec!["enable_ha".to_string(), "cluster_id".into()]
        );
        assert_eq!(f.positional, vec!["pos".to_string(), "--port".into()]);
    }
}
