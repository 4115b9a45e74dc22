//! The report's plots, drawn by plotters into SVG strings that the page inlines.
//!
//! Every plot is drawn from an aggregate (a histogram), never from rows, so its size does
//! not grow with the run: a bar per Hamming distance (at most 65) or Jaccard bin (20), and
//! a point per distinct cluster size, log-binned when there are more than
//! [`MAX_SIZE_POINTS`].

use std::collections::BTreeMap;

use plotters::coord::ranged1d::IntoSegmentedCoord;
use plotters::prelude::*;

/// Points of the cluster-size plot at most: above this, sizes are merged into logarithmic
/// bins (a factor of 2^(1/8) wide), which keeps the plot's SVG under about 30 KB.
pub const MAX_SIZE_POINTS: usize = 200;

const WIDTH: u32 = 640;
const HEIGHT: u32 = 300;
const BAR: RGBColor = RGBColor(0x2b, 0x6c, 0xb0);
const EXACT: RGBColor = RGBColor(0xd9, 0x82, 0x2b);

fn font(size: u32) -> TextStyle<'static> {
    ("sans-serif", size).into_font().into()
}

/// A bar chart of counts by label (`bars[i]` = (label, near, exact)), stacked.
pub fn bars(
    title: &str,
    x_desc: &str,
    y_desc: &str,
    bars: &[(String, u64, u64)],
) -> Result<String, String> {
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (WIDTH, HEIGHT)).into_drawing_area();
        root.fill(&WHITE).map_err(|e| e.to_string())?;
        let top = bars.iter().map(|b| b.1 + b.2).max().unwrap_or(0).max(1);
        let n = bars.len().max(1) as u32;
        let mut chart = ChartBuilder::on(&root)
            .caption(title, font(16))
            .margin(10)
            .x_label_area_size(40)
            .y_label_area_size(60)
            .build_cartesian_2d((0u32..n).into_segmented(), 0u64..top + top / 10 + 1)
            .map_err(|e| e.to_string())?;
        let labels: Vec<String> = bars.iter().map(|b| b.0.clone()).collect();
        chart
            .configure_mesh()
            .disable_x_mesh()
            .x_desc(x_desc)
            .y_desc(y_desc)
            .x_labels(bars.len().min(22))
            .x_label_formatter(&|v| match v {
                SegmentValue::CenterOf(i) => labels.get(*i as usize).cloned().unwrap_or_default(),
                _ => String::new(),
            })
            .label_style(font(11))
            .draw()
            .map_err(|e| e.to_string())?;
        for (i, (_, near, exact)) in bars.iter().enumerate() {
            let i = i as u32;
            let x0 = SegmentValue::Exact(i);
            let x1 = SegmentValue::Exact(i + 1);
            if *exact > 0 {
                chart
                    .draw_series(std::iter::once(Rectangle::new(
                        [(x0.clone(), 0), (x1.clone(), *exact)],
                        EXACT.filled(),
                    )))
                    .map_err(|e| e.to_string())?;
            }
            if *near > 0 {
                chart
                    .draw_series(std::iter::once(Rectangle::new(
                        [(x0, *exact), (x1, exact + near)],
                        BAR.filled(),
                    )))
                    .map_err(|e| e.to_string())?;
            }
        }
        root.present().map_err(|e| e.to_string())?;
    }
    Ok(svg)
}

/// Cluster sizes against how many clusters have them, both axes logarithmic.
pub fn cluster_sizes(sizes: &BTreeMap<u64, u64>) -> Result<String, String> {
    let points = log_binned(sizes);
    let max_size = points.iter().map(|p| p.0).fold(2.0, f64::max);
    let max_count = points.iter().map(|p| p.1).fold(2.0, f64::max);
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (WIDTH, HEIGHT)).into_drawing_area();
        root.fill(&WHITE).map_err(|e| e.to_string())?;
        let mut chart = ChartBuilder::on(&root)
            .caption("Cluster sizes (log-log)", font(16))
            .margin(10)
            .x_label_area_size(40)
            .y_label_area_size(60)
            .build_cartesian_2d(
                (1.0f64..max_size * 1.5).log_scale(),
                (0.8f64..max_count * 1.5).log_scale(),
            )
            .map_err(|e| e.to_string())?;
        chart
            .configure_mesh()
            .x_desc("documents in the cluster")
            .y_desc("clusters")
            .label_style(font(11))
            .x_label_formatter(&|v| format!("{v:.0}"))
            .y_label_formatter(&|v| format!("{v:.0}"))
            .draw()
            .map_err(|e| e.to_string())?;
        chart
            .draw_series(
                points
                    .iter()
                    .map(|&(x, y)| Circle::new((x, y), 3, BAR.filled())),
            )
            .map_err(|e| e.to_string())?;
        root.present().map_err(|e| e.to_string())?;
    }
    Ok(svg)
}

/// (size, clusters) points; merged into logarithmic bins (mean size, total clusters) when
/// there are more than [`MAX_SIZE_POINTS`] sizes.
fn log_binned(sizes: &BTreeMap<u64, u64>) -> Vec<(f64, f64)> {
    if sizes.len() <= MAX_SIZE_POINTS {
        return sizes.iter().map(|(&s, &c)| (s as f64, c as f64)).collect();
    }
    let mut bins: BTreeMap<i64, (f64, f64)> = BTreeMap::new();
    for (&size, &count) in sizes {
        let bin = ((size as f64).log2() * 8.0).floor() as i64;
        let slot = bins.entry(bin).or_default();
        slot.0 += size as f64 * count as f64;
        slot.1 += count as f64;
    }
    bins.into_values()
        .map(|(weighted, count)| (weighted / count, count))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn many_sizes_are_binned_and_keep_their_clusters() {
        let sizes: BTreeMap<u64, u64> = (2..2000).map(|s| (s, 3)).collect();
        let points = log_binned(&sizes);
        assert!(points.len() <= MAX_SIZE_POINTS, "{}", points.len());
        let total: f64 = points.iter().map(|p| p.1).sum();
        assert_eq!(total, 3.0 * 1998.0);
    }

    #[test]
    fn plots_are_svg() {
        let svg = bars("t", "x", "y", &[("0".into(), 3, 2), ("1".into(), 5, 0)]).unwrap();
        assert!(svg.starts_with("<svg") && svg.contains("</svg>"), "{svg}");
        let sizes: BTreeMap<u64, u64> = [(2, 10), (3, 4), (40, 1)].into();
        assert!(cluster_sizes(&sizes).unwrap().contains("<circle"));
    }
}
