//! A read-only `ObjectStore` over iceberg's `FileIO`, so the `datafusion-parquet` engine (DataFusion's
//! own Parquet reader on the raw data files) reads the lake's S3 objects through the same opendal
//! client and credentials as iceflight and upstream iceberg-datafusion. object_store's own S3 client
//! (its `aws` feature) would switch on `chrono/serde` and rebuild the whole workspace; this keeps the
//! I/O layer equal across the three Rust engines instead.
//!
//! Only reads exist: `get_opts` (whole object, a range, or `head`). Sizes are cached per path, so a
//! ranged read costs one request after the first `head`. Everything else is `NotImplemented`.

use std::collections::HashMap;
use std::fmt;
use std::sync::Mutex;

use async_trait::async_trait;
use datafusion::object_store::path::Path;
use datafusion::object_store::{
    CopyOptions, Error, GetOptions, GetResult, GetResultPayload, ListResult, MultipartUpload,
    ObjectMeta, ObjectStore, PutMultipartOptions, PutOptions, PutPayload, PutResult, Result,
};
use futures::StreamExt;
use futures::stream::BoxStream;
use iceberg::io::FileIO;

/// Objects under `base` (`s3://bucket`), read through `file_io`.
pub struct FileIoStore {
    file_io: FileIO,
    base: String,
    sizes: Mutex<HashMap<Path, u64>>,
}

impl FileIoStore {
    /// A store for the objects under `base` (scheme and bucket, e.g. `s3://warehouse`).
    pub fn new(file_io: FileIO, base: &str) -> Self {
        Self {
            file_io,
            base: base.trim_end_matches('/').to_string(),
            sizes: Mutex::new(HashMap::new()),
        }
    }

    fn url(&self, location: &Path) -> String {
        format!("{}/{}", self.base, location.as_ref())
    }

    fn not_implemented(operation: &str) -> Error {
        Error::NotImplemented {
            operation: operation.into(),
            implementer: "FileIoStore (read-only)".into(),
        }
    }

    fn generic(e: iceberg::Error) -> Error {
        Error::Generic {
            store: "FileIoStore",
            source: Box::new(e),
        }
    }

    async fn size(&self, location: &Path) -> Result<u64> {
        if let Some(size) = self.sizes.lock().expect("not poisoned").get(location) {
            return Ok(*size);
        }
        let input = self
            .file_io
            .new_input(self.url(location))
            .map_err(Self::generic)?;
        let size = input.metadata().await.map_err(Self::generic)?.size;
        self.sizes
            .lock()
            .expect("not poisoned")
            .insert(location.clone(), size);
        Ok(size)
    }
}

impl fmt::Debug for FileIoStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "FileIoStore({})", self.base)
    }
}

impl fmt::Display for FileIoStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "FileIoStore({})", self.base)
    }
}

#[async_trait]
impl ObjectStore for FileIoStore {
    async fn put_opts(&self, _: &Path, _: PutPayload, _: PutOptions) -> Result<PutResult> {
        Err(Self::not_implemented("put_opts"))
    }

    async fn put_multipart_opts(
        &self,
        _: &Path,
        _: PutMultipartOptions,
    ) -> Result<Box<dyn MultipartUpload>> {
        Err(Self::not_implemented("put_multipart_opts"))
    }

    async fn get_opts(&self, location: &Path, options: GetOptions) -> Result<GetResult> {
        let size = self.size(location).await?;
        let meta = ObjectMeta {
            location: location.clone(),
            last_modified: chrono::DateTime::UNIX_EPOCH,
            size,
            e_tag: None,
            version: None,
        };
        let range = match &options.range {
            Some(r) => r.as_range(size).map_err(|e| Error::Generic {
                store: "FileIoStore",
                source: Box::new(e),
            })?,
            None => 0..size,
        };
        let bytes = if options.head || range.is_empty() {
            bytes::Bytes::new()
        } else {
            let input = self
                .file_io
                .new_input(self.url(location))
                .map_err(Self::generic)?;
            let reader = input.reader().await.map_err(Self::generic)?;
            reader.read(range.clone()).await.map_err(Self::generic)?
        };
        Ok(GetResult {
            payload: GetResultPayload::Stream(futures::stream::once(async { Ok(bytes) }).boxed()),
            meta,
            range,
            attributes: Default::default(),
        })
    }

    fn delete_stream(
        &self,
        _: BoxStream<'static, Result<Path>>,
    ) -> BoxStream<'static, Result<Path>> {
        futures::stream::once(async { Err(Self::not_implemented("delete_stream")) }).boxed()
    }

    fn list(&self, _: Option<&Path>) -> BoxStream<'static, Result<ObjectMeta>> {
        futures::stream::once(async { Err(Self::not_implemented("list")) }).boxed()
    }

    async fn list_with_delimiter(&self, _: Option<&Path>) -> Result<ListResult> {
        Err(Self::not_implemented("list_with_delimiter"))
    }

    async fn copy_opts(&self, _: &Path, _: &Path, _: CopyOptions) -> Result<()> {
        Err(Self::not_implemented("copy_opts"))
    }
}
