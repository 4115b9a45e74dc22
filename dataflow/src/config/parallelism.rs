//! How a job is spread over worker threads and processes (timely's `-w -n -p -h`).

/// How the job is spread over threads and processes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Parallelism {
    /// Worker threads in each process.
    pub workers: usize,
    /// This process's index.
    pub process: usize,
    /// `host:port` of every process, in process order; empty for a single process.
    pub addresses: Vec<String>,
}

impl Parallelism {
    pub fn local(workers: usize) -> Self {
        Parallelism {
            workers: workers.max(1),
            process: 0,
            addresses: Vec::new(),
        }
    }

    pub fn processes(&self) -> usize {
        self.addresses.len().max(1)
    }

    pub fn timely_config(&self) -> timely::Config {
        let communication = if self.addresses.len() <= 1 {
            timely::CommunicationConfig::Process(self.workers)
        } else {
            timely::CommunicationConfig::Cluster {
                threads: self.workers,
                process: self.process,
                addresses: self.addresses.clone(),
                report: false,
                zerocopy: false,
            }
        };
        timely::Config {
            communication,
            worker: timely::WorkerConfig::default(),
        }
    }
}
