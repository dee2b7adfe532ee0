//! Sizes and durations as written in the config file, on the command line and in `SET`.

use std::time::Duration;

/// A size that is not one: the message quotes the value given.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SizeError {
    /// Not a number followed by a known unit.
    #[error("invalid size {0:?} (e.g. 4MiB, 512MB, 1048576)")]
    NotASize(String),
    /// A number followed by an unknown unit.
    #[error("invalid size unit in {0:?}")]
    Unit(String),
    /// Zero, negative or less than one byte.
    #[error("size must be positive: {0:?}")]
    NotPositive(String),
}

/// Parses a size such as `4MiB`, `512MB`, `1G` or `1048576` into bytes (binary and decimal
/// suffixes, case-insensitive; fractions allowed, `1.5GiB`).
///
/// Errors: [`SizeError`] for anything else, and for a size under one byte.
pub fn parse_size(s: &str) -> Result<usize, SizeError> {
    let t = s.trim();
    let split = t
        .find(|c: char| !c.is_ascii_digit() && c != '.')
        .unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let value: f64 = num
        .parse()
        .map_err(|_| SizeError::NotASize(s.to_string()))?;
    let mult: u64 = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 1,
        "k" | "kb" => 1_000,
        "kib" => 1 << 10,
        "m" | "mb" => 1_000_000,
        "mib" => 1 << 20,
        "g" | "gb" => 1_000_000_000,
        "gib" => 1 << 30,
        _ => return Err(SizeError::Unit(s.to_string())),
    };
    // A whole number is multiplied exactly (what `ByteSize` writes reads back to the same bytes
    // beyond 2^53), saturating like `as` below.
    if let Ok(whole) = num.parse::<u64>() {
        if whole == 0 {
            return Err(SizeError::NotPositive(s.to_string()));
        }
        return Ok(usize::try_from(whole.saturating_mul(mult)).unwrap_or(usize::MAX));
    }
    let bytes = value * mult as f64;
    if bytes.is_nan() || bytes < 1.0 {
        return Err(SizeError::NotPositive(s.to_string()));
    }
    // `as` saturates: `1e30GiB` is usize::MAX bytes, which no bound check downstream accepts.
    Ok(bytes as usize)
}

/// A size in bytes as the config file writes it (`"4GiB"`, `"512MB"`, `"1048576"` or an integer),
/// read by [`parse_size`] while the file is parsed, so a bad size fails there with the file's
/// line. Written back ([`std::fmt::Display`], serde) in the largest binary unit that divides it
/// exactly (`4GiB`, `1536MiB`, `1000B`), which reads back to the same bytes. Never zero when
/// read.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ByteSize(pub u64);

impl ByteSize {
    /// The size in bytes.
    pub fn bytes(self) -> u64 {
        self.0
    }
}

impl std::str::FromStr for ByteSize {
    type Err = SizeError;

    /// Errors: as [`parse_size`].
    fn from_str(s: &str) -> Result<Self, SizeError> {
        parse_size(s).map(|b| Self(b as u64))
    }
}

impl std::fmt::Display for ByteSize {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let b = self.0;
        match [(1u64 << 30, "GiB"), (1 << 20, "MiB"), (1 << 10, "KiB")]
            .into_iter()
            .find(|(unit, _)| b > 0 && b.is_multiple_of(*unit))
        {
            Some((unit, name)) => write!(f, "{}{name}", b / unit),
            None => write!(f, "{b}B"),
        }
    }
}

impl serde::Serialize for ByteSize {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> serde::Deserialize<'de> for ByteSize {
    /// Errors: text [`parse_size`] refuses, or an integer below 1, with the value given.
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Visitor;
        impl serde::de::Visitor<'_> for Visitor {
            type Value = ByteSize;

            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a size such as \"4MiB\", \"512MB\" or 1048576")
            }

            fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<ByteSize, E> {
                v.parse().map_err(E::custom)
            }

            fn visit_u64<E: serde::de::Error>(self, v: u64) -> Result<ByteSize, E> {
                match v {
                    0 => Err(E::custom(SizeError::NotPositive(v.to_string()))),
                    b => Ok(ByteSize(b)),
                }
            }

            fn visit_i64<E: serde::de::Error>(self, v: i64) -> Result<ByteSize, E> {
                let b = u64::try_from(v)
                    .map_err(|_| E::custom(SizeError::NotPositive(v.to_string())))?;
                self.visit_u64(b)
            }
        }
        d.deserialize_any(Visitor)
    }
}

/// Parses a non-negative duration: `250ms`, `1s`, `1.5s`, `5m`, `1h`, `7d`, or a plain number of
/// milliseconds, rounded to whole milliseconds (what [`format_duration`] writes back; the
/// `config` fuzz target found `11411411144` coming out a nanosecond off through `f64`
/// seconds). `None` for anything else (negative, not finite, an unknown unit, more than a
/// year).
pub fn parse_duration(value: &str) -> Option<Duration> {
    let v = value.trim();
    let units = [
        ("ms", 1e-3),
        ("s", 1.0),
        ("m", 60.0),
        ("h", 3600.0),
        ("d", 86400.0),
    ];
    let (number, seconds_per_unit) = units
        .into_iter()
        .find_map(|(unit, scale)| Some((v.strip_suffix(unit)?, scale)))
        .unwrap_or((v, 1e-3));
    let n: f64 = number.trim().parse().ok()?;
    let seconds = n * seconds_per_unit;
    (n.is_finite() && n >= 0.0 && seconds <= 366.0 * 86400.0)
        .then(|| Duration::from_millis((seconds * 1e3).round() as u64))
}

/// `1s`, `1.5s` or `250ms`: how [`parse_duration`] reads it back.
pub fn format_duration(d: Duration) -> String {
    let ms = d.as_millis();
    if ms.is_multiple_of(1000) && ms > 0 {
        format!("{}s", ms / 1000)
    } else {
        format!("{ms}ms")
    }
}

/// Serde for a duration key written as text (`"30s"`, `"5m"`; [`parse_duration`]), used with
/// `#[serde(with = "crate::units::duration_text")]`: every duration of the config file is read
/// this way, and written back by [`format_duration`].
pub mod duration_text {
    use std::time::Duration;

    use serde::{Deserialize, Deserializer, Serializer};

    /// Errors: text [`super::parse_duration`] does not read, with the value given.
    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Duration, D::Error> {
        let s = String::deserialize(d)?;
        super::parse_duration(&s).ok_or_else(|| {
            serde::de::Error::custom(format!("invalid duration {s:?} (e.g. 250ms, 30s, 5m)"))
        })
    }

    /// Writes [`super::format_duration`]'s text.
    pub fn serialize<S: Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&super::format_duration(*d))
    }

    /// The same for an optional key (absent: `None`).
    pub mod option {
        use std::time::Duration;

        use serde::{Deserialize, Deserializer, Serializer};

        /// Errors: as [`super::deserialize`].
        pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Duration>, D::Error> {
            #[derive(Deserialize)]
            struct Text(#[serde(with = "super")] Duration);
            Ok(Option::<Text>::deserialize(d)?.map(|t| t.0))
        }

        /// Writes [`super::super::format_duration`]'s text, or nothing.
        pub fn serialize<S: Serializer>(d: &Option<Duration>, s: S) -> Result<S::Ok, S::Error> {
            match d {
                Some(d) => s.serialize_some(&super::super::format_duration(*d)),
                None => s.serialize_none(),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes() {
        assert_eq!(parse_size("4MiB").unwrap(), 4 * 1024 * 1024);
        assert_eq!(parse_size("512MB").unwrap(), 512_000_000);
        assert_eq!(parse_size("1048576").unwrap(), 1_048_576);
        assert_eq!(parse_size("1gib").unwrap(), 1 << 30);
        assert_eq!(
            parse_size("abc").unwrap_err().to_string(),
            "invalid size \"abc\" (e.g. 4MiB, 512MB, 1048576)"
        );
        assert_eq!(parse_size("0"), Err(SizeError::NotPositive("0".into())));
        assert_eq!(parse_size("4XB"), Err(SizeError::Unit("4XB".into())));
    }

    #[test]
    fn byte_sizes_are_written_in_the_largest_exact_unit_and_read_back() {
        for (text, bytes, written) in [
            ("4GiB", 4u64 << 30, "4GiB"),
            ("1.5GiB", 1536 << 20, "1536MiB"),
            ("512MB", 512_000_000, "500000KiB"),
            ("1000", 1000, "1000B"),
            ("9007199254740993", (1 << 53) + 1, "9007199254740993B"),
        ] {
            let size: ByteSize = text.parse().unwrap();
            assert_eq!(size.bytes(), bytes, "{text}");
            assert_eq!(size.to_string(), written, "{text}");
            assert_eq!(written.parse::<ByteSize>().unwrap(), size, "{text}");
        }
        #[derive(serde::Deserialize)]
        struct Doc {
            size: ByteSize,
        }
        let doc: Doc = toml::from_str("size = 2048").unwrap();
        assert_eq!(doc.size, ByteSize(2048));
        let err = toml::from_str::<Doc>("size = \"4XB\"").err().unwrap();
        assert!(
            err.message().contains("invalid size unit in \"4XB\""),
            "{err}"
        );
        assert!(toml::from_str::<Doc>("size = 0").is_err());
    }

    #[test]
    fn durations_round_trip() {
        for (text, ms) in [("250ms", 250), ("1.5s", 1500), ("2m", 120_000), ("40", 40)] {
            let d = parse_duration(text).unwrap();
            assert_eq!(d.as_millis(), ms, "{text}");
            assert_eq!(parse_duration(&format_duration(d)), Some(d));
        }
        // Whole milliseconds, also where f64 seconds would miss them by a nanosecond.
        assert_eq!(
            parse_duration("11411411144"),
            Some(Duration::from_millis(11_411_411_144))
        );
        for bad in ["-1s", "inf", "NaN", "1y", "", "9999h"] {
            assert_eq!(parse_duration(bad), None, "{bad}");
        }
    }
}
