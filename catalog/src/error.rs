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
    Iceberg(#[from] iceberg::Error),
    /// Failure while generating or writing data.
    #[error("{0}")]
    Load(String),
}
