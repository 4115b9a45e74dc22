//! Parallelism flags in timely's convention: `-w/--workers` threads per process,
//! `-n/--processes`, `-p/--process`, `-h/--hostfile`, each with an environment variable
//! for schedulers.

use std::path::PathBuf;

use anyhow::{bail, Context, Result};
use std::time::Duration;

use neardup_dataflow::control::{ControlConfig, FatalHook};
use neardup_dataflow::Parallelism;

#[derive(clap::Args, Debug, Clone)]
pub struct ClusterArgs {
    /// Worker threads in this process
    #[arg(
        short = 'w',
        long,
        env = "NEARDUP_WORKERS",
        default_value_t = 1,
        value_name = "N"
    )]
    pub workers: usize,
    /// Number of processes in the job (each needs the same flags and hostfile)
    #[arg(
        short = 'n',
        long,
        env = "NEARDUP_PROCESSES",
        default_value_t = 1,
        value_name = "N"
    )]
    pub processes: usize,
    /// This process's index, 0-based
    #[arg(
        short = 'p',
        long,
        env = "NEARDUP_PROCESS",
        default_value_t = 0,
        value_name = "I"
    )]
    pub process: usize,
    /// One `host:port` per line, in process order (needed when --processes > 1)
    #[arg(short = 'h', long, env = "NEARDUP_HOSTFILE", value_name = "FILE")]
    pub hostfile: Option<PathBuf>,
    /// Seconds process 0 waits for every process at start-up (and the others for process 0)
    #[arg(
        long,
        env = "NEARDUP_CONNECT_TIMEOUT",
        default_value_t = neardup_dataflow::control::DEFAULT_CONNECT_TIMEOUT.as_secs(),
        value_name = "SECS"
    )]
    pub connect_timeout: u64,
    /// Seconds without a heartbeat after which a process counts as lost and the job stops
    #[arg(
        long,
        env = "NEARDUP_PEER_TIMEOUT",
        default_value_t = neardup_dataflow::control::DEFAULT_PEER_TIMEOUT.as_secs(),
        value_name = "SECS"
    )]
    pub peer_timeout: u64,
    /// Names the job: processes of different jobs never join (default: from --output)
    #[arg(long, env = "NEARDUP_JOB_ID", value_name = "ID")]
    pub job_id: Option<String>,
    /// A file holding the job's shared secret (mode 600: readable by its owner only): only
    /// processes started with the same secret can join the job (docs/deploy.md, "Secrets")
    #[arg(long, env = "NEARDUP_SECRET_FILE", value_name = "FILE")]
    pub secret_file: Option<PathBuf>,
}

impl ClusterArgs {
    pub fn control(&self) -> Result<ControlConfig> {
        if self.connect_timeout == 0 || self.peer_timeout == 0 {
            bail!("--connect-timeout and --peer-timeout must be at least 1 second");
        }
        Ok(ControlConfig {
            connect_timeout: Duration::from_secs(self.connect_timeout),
            peer_timeout: Duration::from_secs(self.peer_timeout),
            job_id: self.job_id.clone().unwrap_or_default(),
            secret: self
                .secret_file
                .as_deref()
                .map(neardup_dataflow::control::Secret::from_file)
                .transpose()?,
            // The fail-stop of a multi-process job: a lost peer ends this process at once.
            // Its temporary files go first, as after an interrupt.
            on_fatal: Some(FatalHook::new(|reason| {
                neardup_dataflow::output::stop::stop(reason);
                eprintln!("error: {reason}; no _SUCCESS was written");
                std::process::exit(1);
            })),
        })
    }

    pub fn parallelism(&self) -> Result<Parallelism> {
        if self.workers == 0 {
            bail!("--workers must be at least 1");
        }
        if self.processes == 0 {
            bail!("--processes must be at least 1");
        }
        if self.process >= self.processes {
            bail!(
                "--process {} is out of range for --processes {}",
                self.process,
                self.processes
            );
        }
        let addresses = match (&self.hostfile, self.processes) {
            (None, 1) => Vec::new(),
            (None, n) => bail!("--processes {n} needs --hostfile with {n} host:port lines"),
            (Some(path), n) => {
                let text = std::fs::read_to_string(path)
                    .with_context(|| format!("cannot read hostfile {}", path.display()))?;
                let hosts = parse_hostfile(&text);
                if hosts.len() != n {
                    bail!(
                        "hostfile {} lists {} processes but --processes is {n}",
                        path.display(),
                        hosts.len()
                    );
                }
                hosts
            }
        };
        Ok(Parallelism {
            workers: self.workers,
            process: self.process,
            addresses,
        })
    }
}

/// Non-empty lines, `#` comments removed.
fn parse_hostfile(text: &str) -> Vec<String> {
    text.lines()
        .map(|l| l.split('#').next().unwrap_or("").trim())
        .filter(|l| !l.is_empty())
        .map(String::from)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hostfiles_skip_comments_and_blank_lines() {
        assert_eq!(
            parse_hostfile("# cluster\na:1\n\n b:2 # second\n"),
            vec!["a:1", "b:2"]
        );
    }
}
