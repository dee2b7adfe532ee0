//! `iceflight_invalidate_cache([catalog])`: drops the cached table metadata and listings of one
//! catalog; without an argument, of all catalogs and the engine's block, footer and
//! manifest-metrics caches too. Returns how many entries were dropped, so the
//! next query sees the catalog's current state even with a long `metadata_cache_ttl`. Works from
//! any client (`SELECT iceflight_invalidate_cache('lake')`), like Trino's
//! `system.flush_metadata_cache()`.

use datafusion::arrow::datatypes::DataType;
use datafusion::common::{Result, ScalarValue, exec_err, plan_datafusion_err};
use datafusion::logical_expr::{
    ColumnarValue, ScalarFunctionArgs, ScalarUDFImpl, Signature, TypeSignature, Volatility,
};
use iceflight_catalog::Catalogs;
use iceflight_scan::read::caches::ScanCaches;
use std::sync::Arc;

/// The SQL function's name.
pub const NAME: &str = "iceflight_invalidate_cache";

/// The function over the engine's catalogs.
#[derive(Debug)]
pub struct InvalidateCache {
    catalogs: Catalogs,
    caches: Arc<ScanCaches>,
    signature: Signature,
}

impl PartialEq for InvalidateCache {
    fn eq(&self, other: &Self) -> bool {
        self.signature == other.signature
    }
}

impl Eq for InvalidateCache {}

impl std::hash::Hash for InvalidateCache {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        NAME.hash(state);
    }
}

impl InvalidateCache {
    /// The function for `catalogs` and the engine's `caches`.
    pub fn new(catalogs: Catalogs, caches: Arc<ScanCaches>) -> Self {
        Self {
            catalogs,
            caches,
            signature: Signature::one_of(
                vec![
                    TypeSignature::Nullary,
                    TypeSignature::Exact(vec![DataType::Utf8]),
                ],
                Volatility::Volatile,
            ),
        }
    }
}

impl ScalarUDFImpl for InvalidateCache {
    fn name(&self) -> &str {
        NAME
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, _args: &[DataType]) -> Result<DataType> {
        Ok(DataType::Int64)
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> Result<ColumnarValue> {
        let name = match args.args.first() {
            None => None,
            Some(ColumnarValue::Scalar(ScalarValue::Utf8(Some(n)))) => Some(n.clone()),
            Some(_) => return exec_err!("{NAME} takes a catalog name literal"),
        };
        let dropped = self
            .catalogs
            .invalidate(name.as_deref())
            .map_err(|e| plan_datafusion_err!("{e}"))?
            + match name {
                None => self.caches.clear() as usize,
                Some(_) => 0,
            };
        Ok(ColumnarValue::Scalar(ScalarValue::Int64(Some(
            dropped as i64,
        ))))
    }
}
