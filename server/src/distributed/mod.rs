//! Scaling out on datafusion-distributed: one coordinator plans, its workers run the stages.
//!
//! ```text
//!   Flight SQL client ──► coordinator (role = coordinator)
//!                           DataFusion plan ──► distributed planner (network boundaries,
//!                           stages; scans split per task: scan_tasks.rs)
//!                           ──► each stage's tasks encoded (datafusion-proto + IcebergScanCodec)
//!                           ──► workers.rs: live workers ──► channels.rs: gRPC to each worker
//!   worker (role = worker) ◄──┘  decode (tables loaded from its own catalogs), relink dynamic
//!                                filters (scan_tasks.rs), run, stream batches back
//! ```
//!
//! `single` (the default) runs every query in the process, as before. A worker serves only
//! datafusion-distributed's worker service on `[server] listen`; Flight SQL clients talk to the
//! coordinator. Workers and coordinator must configure the same catalogs under the same names
//! (credentials stay in each process's configuration; plans never carry them). A worker admits
//! only callers presenting the cluster's secret or a certificate of its CA (`security.rs`).

pub mod channels;
pub mod scan_tasks;
pub mod security;
pub mod workers;

pub use channels::{KEEPALIVE_INTERVAL, KEEPALIVE_TIMEOUT};

use datafusion::execution::SessionStateBuilder;
use datafusion::prelude::SessionConfig;
use datafusion_distributed::{DistributedExt, SessionStateBuilderExt};
use iceflight_scan::distributed::codec::IcebergScanCodec;

use crate::config::{ConfigError, DistributedConfig};
use channels::WorkerChannels;
use security::ClusterCredentials;
use workers::WorkerList;

pub use iceflight_input::config::Role;

/// What a coordinator or worker adds to every session: the scan's codec, the channels to the
/// workers and, on a coordinator, the worker list.
#[derive(Debug, Clone)]
pub struct Cluster {
    role: Role,
    codec: IcebergScanCodec,
    channels: WorkerChannels,
    workers: Option<WorkerList>,
    credentials: ClusterCredentials,
}

impl Cluster {
    /// What a worker adds to each task's session: the scan's codec, our channels (a worker
    /// reads other workers' shuffles) and the relinking of dynamic filters
    /// ([`scan_tasks::relink_dynamic_filters`]).
    pub fn worker_session(&self, builder: SessionStateBuilder) -> SessionStateBuilder {
        builder
            .with_distributed_user_codec(self.codec.clone())
            .with_distributed_channel_resolver(self.channels.clone())
            .with_distributed_worker_plan_rewrite_handler(scan_tasks::relink_dynamic_filters)
    }

    /// The cluster parts for `role` of an engine whose tables `codec` loads. A coordinator
    /// starts probing `config.workers` here (in the background, every `health_interval`).
    ///
    /// Errors: a coordinator without workers, a worker URL that does not parse, a bad interval,
    /// a secret or TLS file that cannot be read ([`ClusterCredentials::from_config`]).
    pub fn new(
        role: Role,
        config: &DistributedConfig,
        codec: IcebergScanCodec,
    ) -> Result<Self, ConfigError> {
        let interval = config.health_interval()?;
        let credentials = ClusterCredentials::from_config(config)?;
        let workers = match role {
            Role::Coordinator => Some(WorkerList::start(&config.workers, interval, &credentials)?),
            _ => None,
        };
        Ok(Self {
            role,
            codec,
            channels: WorkerChannels::new(workers.clone(), credentials.clone()),
            workers,
            credentials,
        })
    }

    /// What this process presents to workers, and a worker admits (`security.rs`).
    pub fn credentials(&self) -> &ClusterCredentials {
        &self.credentials
    }

    /// This process's role.
    pub fn role(&self) -> Role {
        self.role
    }

    /// The workers a coordinator sends tasks to (`None` on other roles).
    pub fn workers(&self) -> Option<&WorkerList> {
        self.workers.as_ref()
    }

    /// A coordinator's session configuration: the live workers, our channels, the scan's codec
    /// and its task-count and scale-up handlers, and the `distributed.*` settings (so `SET
    /// distributed.…` and session settings apply). Other roles: unchanged.
    pub fn coordinator_config(&self, config: SessionConfig) -> SessionConfig {
        let Some(workers) = &self.workers else {
            return config;
        };
        config
            .with_distributed_worker_resolver(workers.clone())
            .with_distributed_channel_resolver(self.channels.clone())
            .with_distributed_user_codec(self.codec.clone())
            .with_distributed_desired_task_count_handler(scan_tasks::desired_task_count)
            .with_distributed_scale_up_leaf_node_handler(scan_tasks::scale_up)
    }

    /// A coordinator's session: DataFusion's planner wrapped in the distributed one (after every
    /// physical optimizer rule, it cuts the plan into stages). Other roles: unchanged.
    pub fn coordinator_session(&self, builder: SessionStateBuilder) -> SessionStateBuilder {
        match self.workers {
            Some(_) => builder.with_distributed_planner(),
            None => builder,
        }
    }
}
