//! Errors of catalog set-up and loading, kept typed for the edges (CLI exit messages, Flight
//! status codes). Inside DataFusion they travel as `DataFusionError::External`.

/// A catalog-layer failure.
#[derive(Debug, thiserror::Error)]
pub enum CatalogError {
    /// The catalog service or database cannot be reached (→ gRPC `Unavailable`).
    #[error("catalog {catalog} at {uri} is unavailable: {message}")]
    Unavailable {
        /// Catalog name.
        catalog: String,
        /// URI that was tried.
        uri: String,
        /// Underlying error text.
        message: String,
    },
    /// The catalog refused our credentials or token (→ `Unauthenticated`).
    #[error("catalog {catalog} refused the credentials: {message}")]
    Unauthenticated {
        /// Catalog name.
        catalog: String,
        /// What was refused.
        message: String,
    },
    /// Invalid configuration.
    #[error("{0}")]
    Config(String),
    /// A named catalog, namespace or table does not exist (→ `NotFound`).
    #[error("{0}")]
    NotFound(String),
    /// Refused to overwrite existing data (→ `AlreadyExists`).
    #[error("{0}")]
    AlreadyExists(String),
    /// Any other iceberg error.
    #[error(transparent)]
    Iceberg(iceberg::Error),
    /// Failure while generating or writing data.
    #[error("{0}")]
    Load(String),
    /// A load was stopped (Ctrl-C, SIGTERM) and removed what it had written.
    #[error("load interrupted; removed what it had written")]
    Interrupted,
}

/// An iceberg error, unwrapped to the typed outage or refusal it carries (REST client), so its
/// message is not repeated as the error's source.
impl From<iceberg::Error> for CatalogError {
    fn from(e: iceberg::Error) -> Self {
        Self::typed_source(&e).unwrap_or(Self::Iceberg(e))
    }
}

impl CatalogError {
    /// The typed outage or refusal an iceberg error carries as its source (put there by the
    /// REST client, `rest.rs`), copied out.
    pub fn typed_source(e: &iceberg::Error) -> Option<Self> {
        std::error::Error::source(e)?
            .downcast_ref::<Self>()?
            .duplicate()
    }

    /// A copy of an [`Self::Unavailable`] or [`Self::Unauthenticated`] error (`None` for the
    /// others, which hold sources that cannot be copied).
    pub fn duplicate(&self) -> Option<Self> {
        match self {
            Self::Unavailable {
                catalog,
                uri,
                message,
            } => Some(Self::Unavailable {
                catalog: catalog.clone(),
                uri: uri.clone(),
                message: message.clone(),
            }),
            Self::Unauthenticated { catalog, message } => Some(Self::Unauthenticated {
                catalog: catalog.clone(),
                message: message.clone(),
            }),
            _ => None,
        }
    }
}

/// Maps an iceberg error to a DataFusion error, keeping "not found" recognisable.
pub fn to_df_error(e: iceberg::Error) -> datafusion::common::DataFusionError {
    // A typed error from the REST client (rest.rs) travels as the iceberg error's source.
    if let Some(typed) = CatalogError::typed_source(&e) {
        return datafusion::common::DataFusionError::External(Box::new(typed));
    }
    let e = match e.kind() {
        iceberg::ErrorKind::NamespaceNotFound | iceberg::ErrorKind::TableNotFound => {
            CatalogError::NotFound(e.to_string())
        }
        iceberg::ErrorKind::NamespaceAlreadyExists | iceberg::ErrorKind::TableAlreadyExists => {
            CatalogError::AlreadyExists(e.to_string())
        }
        _ => CatalogError::Iceberg(e),
    };
    datafusion::common::DataFusionError::External(Box::new(e))
}
