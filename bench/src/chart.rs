//! The results chart: per query, each engine's median time divided by iceflight's, as bars on a
//! log axis starting at 1 (up = slower than iceflight, down = faster), one colour per engine.
//! Drawn with plotters' bitmap backend; text needs a TrueType font, taken from
//! `$ICEFLIGHT_CHART_FONT` or DejaVu Sans / Liberation Sans in the usual system folders.

use std::path::Path;

use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};
use serde_json::{Value, json};

const FONTS: [&str; 4] = [
    "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf",
    "/usr/share/fonts/TTF/DejaVuSans.ttf",
    "/usr/share/fonts/dejavu/DejaVuSans.ttf",
    "/usr/share/fonts/truetype/liberation/LiberationSans-Regular.ttf",
];

const COLOURS: [RGBColor; 6] = [
    RGBColor(0x1f, 0x77, 0xb4),
    RGBColor(0xff, 0x7f, 0x0e),
    RGBColor(0x2c, 0xa0, 0x2c),
    RGBColor(0xd6, 0x27, 0x28),
    RGBColor(0x94, 0x67, 0xbd),
    RGBColor(0x8c, 0x56, 0x4b),
];

/// Registers the first font found as plotters' `sans-serif` (once per process).
fn register_font() -> Result<(), String> {
    static REGISTERED: std::sync::OnceLock<Result<(), String>> = std::sync::OnceLock::new();
    REGISTERED
        .get_or_init(|| {
            let candidates: Vec<String> = std::env::var("ICEFLIGHT_CHART_FONT")
                .into_iter()
                .chain(FONTS.iter().map(|s| s.to_string()))
                .collect();
            let bytes = candidates
                .iter()
                .find_map(|p| std::fs::read(p).ok())
                .ok_or_else(|| {
                    format!(
                        "no TrueType font found (set ICEFLIGHT_CHART_FONT; tried {})",
                        candidates.join(", ")
                    )
                })?;
            let bytes: &'static [u8] = Box::leak(bytes.into_boxed_slice());
            plotters::style::register_font("sans-serif", FontStyle::Normal, bytes)
                .map_err(|_| "the font file is not a valid TrueType font".to_string())
        })
        .clone()
}

/// Ratio ticks 1-2-5 per decade inside `[lo, hi]`.
fn ticks(lo: f64, hi: f64) -> Vec<f64> {
    (-3..=3)
        .flat_map(|e| [1.0, 2.0, 5.0].map(|m| m * 10f64.powi(e)))
        .filter(|t| (lo..=hi).contains(t))
        .collect()
}

/// Median ms of `engine` on `query` in `report`, when its status is `ok`.
fn median(report: &Value, query: &str, engine: &str) -> Option<f64> {
    report["queries"]
        .as_array()?
        .iter()
        .find(|x| x["query"] == json!(query) && x["engine"] == json!(engine))
        .filter(|x| x["status"] == json!("ok"))
        .and_then(|x| x["median_ms"].as_f64())
}

/// Redraws the chart of a results file: `<stem>.json` → `<stem>.png` beside it.
///
/// Errors: an unreadable or malformed file, or any [`draw`] error, as text.
pub fn redraw(json_path: &Path) -> Result<std::path::PathBuf, String> {
    let text =
        std::fs::read_to_string(json_path).map_err(|e| format!("{}: {e}", json_path.display()))?;
    let report: Value =
        serde_json::from_str(&text).map_err(|e| format!("{}: {e}", json_path.display()))?;
    let engines: Vec<String> = report["engines"]
        .as_array()
        .ok_or_else(|| format!("{}: no engines", json_path.display()))?
        .iter()
        .filter_map(|e| e.as_str().map(String::from))
        .collect();
    let png = json_path.with_extension("png");
    draw(&report, &engines, &png)?;
    Ok(png)
}

/// Draws `report` (the run's JSON) to `path` (PNG, 1400 × 600 px). Errors: no font, no iceflight
/// column, or a drawing error, as text.
pub fn draw(report: &Value, engines: &[String], path: &Path) -> Result<(), String> {
    register_font()?;
    if !engines.iter().any(|e| e == "iceflight") {
        return Err("no iceflight column to compare against".into());
    }
    let mut queries: Vec<String> = report["queries"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|e| e["query"].as_str().map(String::from))
        .collect();
    queries.dedup();
    let others: Vec<&String> = engines.iter().filter(|e| *e != "iceflight").collect();
    // (query index, engine index, ratio to iceflight)
    let bars: Vec<(usize, usize, f64)> = queries
        .iter()
        .enumerate()
        .flat_map(|(qi, q)| {
            let base = median(report, q, "iceflight");
            others
                .iter()
                .enumerate()
                .filter_map(move |(ei, e)| Some((qi, ei, median(report, q, e)? / base?)))
        })
        .filter(|(_, _, r)| r.is_finite() && *r > 0.0)
        .collect();
    let lo = bars.iter().map(|b| b.2).fold(1.0f64, f64::min) / 1.5;
    // Headroom above the tallest bar for the legend (upper right).
    let hi = bars.iter().map(|b| b.2).fold(1.0f64, f64::max) * 4.0;

    let err = |e: &dyn std::fmt::Display| e.to_string();
    let root = BitMapBackend::new(path, (1400, 600)).into_drawing_area();
    root.fill(&WHITE).map_err(|e| err(&e))?;
    let title = format!(
        "{} SF {} ({} layout): median time relative to iceflight (log scale; below 1 = faster than iceflight)",
        report["suite"].as_str().unwrap_or(""),
        report["scale"].as_str().unwrap_or(""),
        report["layout"].as_str().unwrap_or("default"),
    );
    let n = queries.len() as f64;
    let mut chart = ChartBuilder::on(&root)
        .caption(title, ("sans-serif", 20))
        .margin(15)
        .x_label_area_size(35)
        .y_label_area_size(60)
        .build_cartesian_2d(0f64..n, (lo..hi).log_scale().with_key_points(ticks(lo, hi)))
        .map_err(|e| err(&e))?;
    chart
        .configure_mesh()
        .disable_x_mesh()
        .x_labels(0)
        .y_desc("engine time / iceflight time")
        .y_label_formatter(&|v| format!("{v:.2}"))
        .draw()
        .map_err(|e| err(&e))?;
    let width = 0.8 / others.len().max(1) as f64;
    for (ei, engine) in others.iter().enumerate() {
        let colour = COLOURS[ei % COLOURS.len()];
        chart
            .draw_series(bars.iter().filter(|b| b.1 == ei).map(|&(qi, _, r)| {
                let x0 = qi as f64 + 0.1 + ei as f64 * width;
                Rectangle::new([(x0, 1.0), (x0 + width * 0.9, r)], colour.filled())
            }))
            .map_err(|e| err(&e))?
            .label(engine.as_str())
            .legend(move |(x, y)| Rectangle::new([(x, y - 5), (x + 12, y + 5)], colour.filled()));
    }
    chart
        .draw_series(LineSeries::new(
            [(0.0, 1.0), (n, 1.0)],
            BLACK.stroke_width(2),
        ))
        .map_err(|e| err(&e))?
        .label("iceflight = 1")
        .legend(|(x, y)| PathElement::new([(x, y), (x + 12, y)], BLACK.stroke_width(2)));
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperRight)
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .draw()
        .map_err(|e| err(&e))?;
    let style = ("sans-serif", 14)
        .into_font()
        .color(&BLACK)
        .pos(Pos::new(HPos::Center, VPos::Top));
    for (qi, q) in queries.iter().enumerate() {
        let (x, y) = chart.backend_coord(&(qi as f64 + 0.5, lo));
        root.draw(&Text::new(q.clone(), (x, y + 6), style.clone()))
            .map_err(|e| err(&e))?;
    }
    root.present().map_err(|e| err(&e))?;
    Ok(())
}
