//! The SVG plots of `lkcs sweep` (plotters' SVG backend; text is written as SVG `<text>`,
//! so no font is loaded): messages per pair against n or |N_i|+1 with the papers' best and
//! worst case, the distributions of the waiting times, and the outcome counts.

use super::summary::describe;
use super::sweep::{Point, Record};
use lkcs::Algorithm;
use plotters::coord::ranged1d::SegmentValue;
use plotters::prelude::*;
use std::collections::BTreeMap;
use std::path::Path;

/// Draws one figure into a file.
pub(crate) type Drawer<'a> = &'a dyn Fn(&Path) -> Result<(), String>;

/// A colour-blind-friendly palette (Tableau 10).
const PALETTE: [RGBColor; 10] = [
    RGBColor(31, 119, 180),
    RGBColor(255, 127, 14),
    RGBColor(44, 160, 44),
    RGBColor(214, 39, 40),
    RGBColor(148, 103, 189),
    RGBColor(140, 86, 75),
    RGBColor(227, 119, 194),
    RGBColor(127, 127, 127),
    RGBColor(188, 189, 34),
    RGBColor(23, 190, 207),
];
const BEST: RGBColor = RGBColor(0, 110, 0);
const WORST: RGBColor = RGBColor(180, 0, 0);
const FONT: &str = "sans-serif";
const PANEL: (u32, u32) = (640, 460);

fn err<E: std::fmt::Display>(e: E) -> String {
    e.to_string()
}

/// The legend box of every figure: at `position`, labels of `size` points, on a translucent
/// white box with a thin border.
fn draw_legend<'a, DB, CT>(
    chart: &mut ChartContext<'a, DB, CT>,
    position: SeriesLabelPosition,
    size: f64,
) -> Result<(), String>
where
    DB: DrawingBackend + 'a,
    CT: plotters::coord::CoordTranslate,
{
    chart
        .configure_series_labels()
        .position(position)
        .label_font((FONT, size))
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK.mix(0.4))
        .draw()
        .map_err(err)
}

/// The topology family: `torus` for `torus:4x4`.
fn family(p: &Point) -> &str {
    p.topology.split(':').next().unwrap_or("")
}

/// The algorithms of `records`, in order of first appearance.
fn algorithms<'a>(records: impl Iterator<Item = &'a Point>) -> Vec<Algorithm> {
    let mut out = Vec::new();
    for p in records {
        if !out.contains(&p.algorithm) {
            out.push(p.algorithm);
        }
    }
    out
}

/// Panels in two columns.
fn grid_of(panels: usize) -> (usize, usize) {
    let cols = if panels > 1 { 2 } else { 1 };
    (panels.div_ceil(cols).max(1), cols)
}

/// A grid coordinate: its name and how to read it from a point.
type Coord = (&'static str, fn(&Point) -> String);

/// A key built from the coordinates that vary among `rs` (e.g. "uniform:1:12, concurrent").
fn varying(rs: &[&Record], coords: &[Coord]) -> Vec<String> {
    let live: Vec<&Coord> = coords
        .iter()
        .filter(|(_, f)| {
            let mut seen: Vec<String> = rs.iter().map(|r| f(&r.point)).collect();
            seen.sort();
            seen.dedup();
            seen.len() > 1
        })
        .collect();
    rs.iter()
        .map(|r| {
            live.iter()
                .map(|(name, f)| format!("{name} {}", f(&r.point)))
                .collect::<Vec<_>>()
                .join(", ")
        })
        .collect()
}

/// Figure (a): messages per pair against n (or the mean |N_i|+1 when a local algorithm's
/// runs have different neighbourhood sizes), one panel per algorithm, the measured mean of
/// each run as a point and the papers' best and worst case as lines.
pub(crate) fn messages(path: &Path, records: &[&Record]) -> Result<(), String> {
    let records: Vec<&Record> = records.iter().copied().filter(|r| r.n > 0).collect();
    let algs = algorithms(records.iter().map(|r| &r.point));
    let (rows, cols) = grid_of(algs.len());
    let root =
        SVGBackend::new(path, (PANEL.0 * cols as u32, PANEL.1 * rows as u32)).into_drawing_area();
    root.fill(&WHITE).map_err(err)?;
    let areas = root.split_evenly((rows, cols));
    for (&alg, area) in algs.iter().zip(&areas) {
        let rs: Vec<&Record> = records
            .iter()
            .copied()
            .filter(|r| r.point.algorithm == alg)
            .collect();
        let mut closed: Vec<i64> = rs
            .iter()
            .map(|r| (r.closed_mean * 1000.0).round() as i64)
            .collect();
        closed.sort();
        closed.dedup();
        let by_closed = !alg.is_global() && closed.len() > 1;
        let x_of = |r: &Record| {
            if by_closed {
                r.closed_mean
            } else {
                r.n as f64
            }
        };
        let x_desc = if by_closed {
            "|N_i|+1, mean over the processes"
        } else {
            "n (processes)"
        };
        let metric = rs[0].formula.metric;
        let xs: Vec<f64> = rs.iter().map(|r| x_of(r)).collect();
        let (x_min, x_max) = xs
            .iter()
            .fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), &x| {
                (a.min(x), b.max(x))
            });
        let pad = ((x_max - x_min) * 0.06).max(0.5);
        let y_max = rs
            .iter()
            .flat_map(|r| [Some(r.measured), r.formula.best, r.formula.worst])
            .flatten()
            .fold(0.0f64, f64::max);
        // the papers' formulas: one line per setting that changes them
        let setting = |p: &Point| {
            let mut s = vec![family(p).to_string()];
            s.extend(p.coterie.clone());
            s.extend(p.mx.clone().map(|m| format!("mx {m}")));
            s.join(", ")
        };
        let mut settings: Vec<String> = rs.iter().map(|r| setting(&r.point)).collect();
        settings.sort();
        settings.dedup();
        let no_best = rs.iter().all(|r| r.formula.best.is_none());
        let no_worst = rs.iter().all(|r| r.formula.worst.is_none());
        // the measured points: one colour per combination of the coordinates that vary
        let coords: [Coord; 8] = [
            ("topology", |p| family(p).to_string()),
            ("bounds", |p| p.bounds.clone()),
            ("coterie", |p| p.coterie.clone().unwrap_or_default()),
            ("mx", |p| p.mx.clone().unwrap_or_default()),
            ("variant", |p| p.variant.clone()),
            ("workload", |p| p.workload.clone()),
            ("delay", |p| p.delay.clone()),
            ("pairs", |p| p.pairs.to_string()),
        ];
        let keys = varying(&rs, &coords);
        let mut uniq: Vec<&String> = Vec::new();
        for k in &keys {
            if !uniq.contains(&k) {
                uniq.push(k);
            }
        }
        // head room for the legend (about 16 of the plot's ~380 pixels per entry)
        let entries = settings.len() * (usize::from(!no_best) + usize::from(!no_worst))
            + uniq.len()
            + usize::from(rs.iter().any(|r| !r.ok));
        let legend = ((entries as f64 * 16.0 + 24.0) / 380.0).min(0.65);
        let y_max = if y_max > 0.0 {
            y_max * 1.05 / (1.0 - legend)
        } else {
            1.0
        };
        let mut chart = ChartBuilder::on(area)
            .caption(format!("{alg}: {}", describe(alg)), (FONT, 14).into_font())
            .margin(12)
            .x_label_area_size(40)
            .y_label_area_size(60)
            .build_cartesian_2d((x_min - pad)..(x_max + pad), 0f64..y_max)
            .map_err(err)?;
        chart
            .configure_mesh()
            .max_light_lines(0)
            .x_desc(x_desc)
            .y_desc(metric.label())
            .x_label_formatter(&|v| {
                if by_closed {
                    format!("{v:.1}")
                } else if (v - v.round()).abs() < 1e-6 {
                    format!("{v:.0}")
                } else {
                    String::new()
                }
            })
            .y_label_formatter(&|v| format!("{v:.0}"))
            .label_style((FONT, 12))
            .axis_desc_style((FONT, 12))
            .draw()
            .map_err(err)?;

        for s in &settings {
            let group: Vec<&Record> = rs
                .iter()
                .copied()
                .filter(|r| setting(&r.point) == *s)
                .collect();
            let suffix = if settings.len() > 1 {
                format!(" ({s})")
            } else {
                String::new()
            };
            let f = &group[0].formula;
            let line = |pick: fn(&Record) -> Option<f64>| -> Vec<(f64, f64)> {
                let mut by_x: BTreeMap<i64, (f64, f64, usize)> = BTreeMap::new();
                for r in &group {
                    if let Some(y) = pick(r) {
                        let x = x_of(r);
                        let e = by_x
                            .entry((x * 1000.0).round() as i64)
                            .or_insert((x, 0.0, 0));
                        e.1 += y;
                        e.2 += 1;
                    }
                }
                let pts: Vec<(f64, f64)> =
                    by_x.values().map(|(x, y, c)| (*x, y / *c as f64)).collect();
                // a single x: a short level segment, so that the value shows as a line
                match pts[..] {
                    [(x, y)] => vec![(x - pad * 0.6, y), (x + pad * 0.6, y)],
                    _ => pts,
                }
            };
            let best = line(|r| r.formula.best);
            if !best.is_empty() {
                let label = if no_worst {
                    format!(
                        "paper, best case: {} (no worst-case formula){suffix}",
                        f.best_text
                    )
                } else {
                    format!("paper, best case: {}{suffix}", f.best_text)
                };
                chart
                    .draw_series(LineSeries::new(best, BEST.stroke_width(2)))
                    .map_err(err)?
                    .label(label)
                    .legend(|(x, y)| {
                        PathElement::new(vec![(x, y), (x + 18, y)], BEST.stroke_width(2))
                    });
            }
            let worst = line(|r| r.formula.worst);
            if !worst.is_empty() {
                chart
                    .draw_series(DashedLineSeries::new(worst, 6, 4, WORST.stroke_width(2)))
                    .map_err(err)?
                    .label(format!("paper, worst case: {}{suffix}", f.worst_text))
                    .legend(|(x, y)| {
                        PathElement::new(vec![(x, y), (x + 18, y)], WORST.stroke_width(2))
                    });
            }
        }

        for (i, key) in uniq.iter().enumerate() {
            let color = PALETTE[i % PALETTE.len()];
            let pts: Vec<(f64, f64)> = rs
                .iter()
                .zip(&keys)
                .filter(|(r, k)| *k == *key && r.ok)
                .map(|(r, _)| (x_of(r), r.measured))
                .collect();
            if pts.is_empty() {
                continue;
            }
            let mut label = if key.is_empty() {
                "measured, one point per run".to_string()
            } else {
                format!("measured: {key}")
            };
            if no_best && i == 0 {
                label += " (no formula in the paper)";
            }
            chart
                .draw_series(
                    pts.into_iter()
                        .map(move |p| Circle::new(p, 3, color.mix(0.7).filled())),
                )
                .map_err(err)?
                .label(label)
                .legend(move |(x, y)| Circle::new((x + 9, y), 3, color.filled()));
        }
        let failed: Vec<(f64, f64)> = rs
            .iter()
            .filter(|r| !r.ok)
            .map(|r| (x_of(r), r.measured))
            .collect();
        if !failed.is_empty() {
            chart
                .draw_series(
                    failed
                        .into_iter()
                        .map(|p| Cross::new(p, 5, BLACK.stroke_width(2))),
                )
                .map_err(err)?
                .label("failed run (unsafe, deadlocked or stalled)")
                .legend(|(x, y)| Cross::new((x + 9, y), 5, BLACK.stroke_width(2)));
        }
        draw_legend(&mut chart, SeriesLabelPosition::UpperLeft, 11.0)?;
    }
    root.present().map_err(err)
}

/// Steps of the empirical distribution function of `values`: (v, fraction ≤ v), at most
/// about 300 steps (values are binned to x_end/300 when they spread wider).
fn cdf(values: &[u64], x_end: f64) -> Vec<(f64, f64)> {
    let bin = (x_end / 300.0).floor().max(1.0) as u64;
    let mut v: Vec<u64> = values.iter().map(|x| x.div_ceil(bin) * bin).collect();
    v.sort_unstable();
    let total = v.len() as f64;
    let mut out = Vec::new();
    let mut prev = 0.0;
    let mut i = 0;
    while i < v.len() {
        let x = v[i];
        while i < v.len() && v[i] == x {
            i += 1;
        }
        let f = i as f64 / total;
        out.push((x as f64, prev));
        out.push((x as f64, f));
        prev = f;
    }
    if let Some(&(x, _)) = out.last()
        && x < x_end
    {
        out.push((x_end, 1.0));
    }
    out
}

/// Figure (b): the distributions of the waiting times (empirical CDFs over every completed
/// sequence of the runs pooled per topology), one panel per algorithm, delay model and
/// workload; Entry solid, Exit dashed.
pub(crate) fn waiting(path: &Path, records: &[&Record]) -> Result<(), String> {
    let records: Vec<&Record> = records.iter().copied().filter(|r| r.n > 0).collect();
    let mut panels: Vec<(Algorithm, String, String)> = Vec::new();
    for r in &records {
        let key = (
            r.point.algorithm,
            r.point.delay.clone(),
            r.point.workload.clone(),
        );
        if !panels.contains(&key) {
            panels.push(key);
        }
    }
    let (rows, cols) = grid_of(panels.len());
    let root =
        SVGBackend::new(path, (PANEL.0 * cols as u32, PANEL.1 * rows as u32)).into_drawing_area();
    root.fill(&WHITE).map_err(err)?;
    let areas = root.split_evenly((rows, cols));
    for ((alg, delay, workload), area) in panels.iter().zip(&areas) {
        let rs: Vec<&Record> = records
            .iter()
            .copied()
            .filter(|r| {
                r.point.algorithm == *alg
                    && r.point.delay == *delay
                    && r.point.workload == *workload
            })
            .collect();
        // topologies by size
        let mut topos: Vec<(usize, String)> = Vec::new();
        for r in &rs {
            let t = (r.n, r.point.topology.clone());
            if !topos.contains(&t) {
                topos.push(t);
            }
        }
        topos.sort();
        let x_max = rs
            .iter()
            .flat_map(|r| r.exit_waits.iter().chain(&r.entry_waits))
            .copied()
            .max()
            .unwrap_or(0) as f64;
        let x_end = x_max * 1.08 + 1.0;
        // a kind of sequence that never waits in this panel is named, not drawn
        let zero = |f: fn(&Record) -> &Vec<u64>| rs.iter().all(|r| f(r).iter().all(|&w| w == 0));
        let (entry_zero, exit_zero) = (zero(|r| &r.entry_waits), zero(|r| &r.exit_waits));
        let styles = match (entry_zero, exit_zero) {
            (true, true) => "Entry and Exit never wait".to_string(),
            (true, false) => "Exit; Entry never waits".to_string(),
            (false, true) => "Entry; Exit never waits".to_string(),
            (false, false) => "Entry solid, Exit dashed".to_string(),
        };
        let mut chart = ChartBuilder::on(area)
            .caption(
                format!("{alg}, {delay} delays, {workload}: waiting times ({styles})"),
                (FONT, 14).into_font(),
            )
            .margin(12)
            .x_label_area_size(40)
            .y_label_area_size(60)
            .build_cartesian_2d(0f64..x_end, 0f64..1.05)
            .map_err(err)?;
        chart
            .configure_mesh()
            .max_light_lines(0)
            .x_label_formatter(&|v| {
                if (v - v.round()).abs() < 1e-6 {
                    format!("{v:.0}")
                } else {
                    String::new()
                }
            })
            .y_label_formatter(&|v| format!("{v:.1}"))
            .x_desc(
                "waiting time (time units: one unit = the delay of one message under unit delays)",
            )
            .y_desc("fraction of the sequences waiting at most this long")
            .label_style((FONT, 12))
            .axis_desc_style((FONT, 11))
            .draw()
            .map_err(err)?;
        for (i, (_, topo)) in topos.iter().enumerate() {
            let color = PALETTE[i % PALETTE.len()];
            let (mut entry, mut exit) = (Vec::new(), Vec::new());
            for r in rs.iter().filter(|r| r.point.topology == *topo) {
                entry.extend(&r.entry_waits);
                exit.extend(&r.exit_waits);
            }
            if entry.is_empty() && exit.is_empty() {
                continue;
            }
            let label = format!("{topo} ({} pairs)", entry.len());
            let legend = move |(x, y): (i32, i32)| {
                PathElement::new(vec![(x, y), (x + 18, y)], color.stroke_width(2))
            };
            // the solid line: Entry, or Exit when Entry never waits
            let solid = if entry_zero && !exit_zero {
                &exit
            } else {
                &entry
            };
            chart
                .draw_series(LineSeries::new(cdf(solid, x_end), color.stroke_width(2)))
                .map_err(err)?
                .label(label)
                .legend(legend);
            if !entry_zero && !exit_zero {
                chart
                    .draw_series(DashedLineSeries::new(
                        cdf(&exit, x_end),
                        10,
                        6,
                        color.stroke_width(2),
                    ))
                    .map_err(err)?;
            }
        }
        draw_legend(&mut chart, SeriesLabelPosition::LowerRight, 11.0)?;
    }
    root.present().map_err(err)
}

/// Figure (c): passed, failed and skipped runs per algorithm (stacked bars).
pub(crate) fn outcomes(path: &Path, counts: &[(Algorithm, [usize; 3])]) -> Result<(), String> {
    let k = counts.len().max(1);
    let width = (160 * k as u32 + 200).max(PANEL.0);
    let root = SVGBackend::new(path, (width, PANEL.1)).into_drawing_area();
    root.fill(&WHITE).map_err(err)?;
    let y_max = counts
        .iter()
        .map(|(_, c)| c.iter().sum::<usize>())
        .max()
        .unwrap_or(0)
        .max(1) as f64
        * 1.3;
    let mut chart = ChartBuilder::on(&root)
        .caption(
            "runs per algorithm: passed, failed (unsafe, deadlocked or stalled), skipped (refused)",
            (FONT, 14).into_font(),
        )
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(60)
        .build_cartesian_2d((0..k as i32).into_segmented(), 0f64..y_max)
        .map_err(err)?;
    let names: Vec<String> = counts.iter().map(|(a, _)| a.to_string()).collect();
    chart
        .configure_mesh()
        .disable_x_mesh()
        .max_light_lines(0)
        .y_label_formatter(&|v| format!("{v:.0}"))
        .x_labels(k)
        .x_label_formatter(&|v| match v {
            SegmentValue::CenterOf(i) => names.get(*i as usize).cloned().unwrap_or_default(),
            _ => String::new(),
        })
        .y_desc("runs")
        .label_style((FONT, 12))
        .axis_desc_style((FONT, 12))
        .draw()
        .map_err(err)?;
    let kinds = [
        ("passed", RGBColor(44, 160, 44)),
        ("failed", RGBColor(214, 39, 40)),
        ("skipped", RGBColor(170, 170, 170)),
    ];
    for (slot, (name, color)) in kinds.iter().enumerate() {
        let bars: Vec<(i32, f64, f64, usize)> = counts
            .iter()
            .enumerate()
            .filter(|(_, (_, c))| c[slot] > 0)
            .map(|(i, (_, c))| {
                let below: usize = c[..slot].iter().sum();
                (i as i32, below as f64, (below + c[slot]) as f64, c[slot])
            })
            .collect();
        let color = *color;
        chart
            .draw_series(bars.iter().map(|&(i, y0, y1, _)| {
                let mut r = Rectangle::new(
                    [
                        (SegmentValue::Exact(i), y0),
                        (SegmentValue::Exact(i + 1), y1),
                    ],
                    color.filled(),
                );
                r.set_margin(0, 0, 25, 25);
                r
            }))
            .map_err(err)?
            .label(format!(
                "{name}: {}",
                counts.iter().map(|(_, c)| c[slot]).sum::<usize>()
            ))
            .legend(move |(x, y)| Rectangle::new([(x, y - 5), (x + 12, y + 5)], color.filled()));
        chart
            .draw_series(bars.iter().map(|&(i, y0, y1, c)| {
                Text::new(
                    c.to_string(),
                    (SegmentValue::CenterOf(i), (y0 + y1) / 2.0),
                    (FONT, 12).into_font().color(&BLACK),
                )
            }))
            .map_err(err)?;
    }
    draw_legend(&mut chart, SeriesLabelPosition::UpperRight, 12.0)?;
    root.present().map_err(err)
}

/// One panel of [`lines`]: a title, the y axis's description, and the CSV columns drawn in it.
pub(crate) struct Panel {
    pub(crate) title: String,
    pub(crate) y_desc: String,
    pub(crate) columns: Vec<String>,
}

/// Line plots of a table (a CSV with a header row): one panel per [`Panel`], side by side;
/// in each, one line per (column, value of the `by` column), x from the `x` column, both
/// axes logarithmic when `log` (every value must then be positive). The figure of a CSV a
/// program wrote (`lkcs plot`).
pub(crate) fn lines(
    path: &Path,
    header: &[String],
    rows: &[Vec<String>],
    x: &str,
    by: Option<&str>,
    panels: &[Panel],
    log: bool,
) -> Result<(), String> {
    let col = |name: &str| {
        header.iter().position(|h| h == name).ok_or_else(|| {
            format!(
                "no column `{name}` in the CSV (it has {})",
                header.join(", ")
            )
        })
    };
    let num = |row: &[String], i: usize| -> Result<f64, String> {
        let v = row.get(i).map_or("", String::as_str);
        match v.parse::<f64>() {
            Ok(n) if n.is_finite() => Ok(n),
            Ok(_) => Err(format!(
                "`{v}` in column `{}` is not a finite number",
                header[i]
            )),
            Err(_) => Err(format!("`{v}` in column `{}` is not a number", header[i])),
        }
    };
    let xi = col(x)?;
    let groups: Vec<String> = match by {
        Some(b) => {
            let bi = col(b)?;
            let mut g: Vec<String> = Vec::new();
            for r in rows {
                let v = r.get(bi).cloned().unwrap_or_default();
                if !g.contains(&v) {
                    g.push(v);
                }
            }
            g
        }
        None => vec![String::new()],
    };
    let bi = by.map(col).transpose()?;
    // every panel's points first: input the plot refuses leaves `path` as it was
    let mut drawn = Vec::with_capacity(panels.len());
    for panel in panels {
        // (label, points) per line
        let mut series: Vec<(String, Vec<(f64, f64)>)> = Vec::new();
        for c in &panel.columns {
            let ci = col(c)?;
            for g in &groups {
                let mut pts = Vec::new();
                for r in rows {
                    if bi.is_some_and(|bi| r.get(bi) != Some(g)) {
                        continue;
                    }
                    pts.push((num(r, xi)?, num(r, ci)?));
                }
                pts.sort_by(|a, b| a.0.total_cmp(&b.0));
                let label = match (by.is_some(), panel.columns.len() > 1) {
                    (true, true) => format!("{g} {c}"),
                    (true, false) => g.clone(),
                    (false, _) => c.clone(),
                };
                series.push((label, pts));
            }
        }
        let all: Vec<(f64, f64)> = series.iter().flat_map(|s| s.1.iter().copied()).collect();
        if all.is_empty() {
            return Err(format!("panel `{}`: no rows", panel.title));
        }
        if log && all.iter().any(|&(a, b)| a <= 0.0 || b <= 0.0) {
            return Err(format!(
                "panel `{}`: a logarithmic axis needs positive values",
                panel.title
            ));
        }
        let (x0, x1) = all
            .iter()
            .fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), p| {
                (a.min(p.0), b.max(p.0))
            });
        let (y0, y1) = all
            .iter()
            .fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), p| {
                (a.min(p.1), b.max(p.1))
            });
        // the axes, padded: values near f64::MAX overflow them (the tick code then never ends)
        let (xr, yr) = if log {
            ((x0 / 1.3, x1 * 1.3), (y0 / 2.0, y1 * 4.0))
        } else {
            let pad = (x1 - x0).max(1.0) * 0.05;
            ((x0 - pad, x1 + pad), (0.0, y1 * 1.3))
        };
        if ![xr.0, xr.1, yr.0, yr.1].iter().all(|v| v.is_finite()) {
            return Err(format!(
                "panel `{}`: values too large to plot (the axes would overflow)",
                panel.title
            ));
        }
        drawn.push((series, xr, yr));
    }
    let root =
        SVGBackend::new(path, (PANEL.0 * panels.len().max(1) as u32, PANEL.1)).into_drawing_area();
    root.fill(&WHITE).map_err(err)?;
    let areas = root.split_evenly((1, panels.len().max(1)));
    for ((panel, area), (series, xr, yr)) in panels.iter().zip(&areas).zip(drawn) {
        let mut builder = ChartBuilder::on(area);
        builder
            .caption(&panel.title, (FONT, 14).into_font())
            .margin(12)
            .x_label_area_size(40)
            .y_label_area_size(64);
        macro_rules! draw {
            ($chart:expr) => {{
                let mut chart = $chart;
                chart
                    .configure_mesh()
                    .x_desc(x)
                    .y_desc(panel.y_desc.as_str())
                    .x_label_formatter(&|v| format!("{v:.0}"))
                    .y_label_formatter(&|v| {
                        if v.abs() >= 100.0 {
                            format!("{v:.0}")
                        } else {
                            format!("{v:.2}")
                        }
                    })
                    .label_style((FONT, 12))
                    .axis_desc_style((FONT, 12))
                    .draw()
                    .map_err(err)?;
                for (i, (label, pts)) in series.iter().enumerate() {
                    let color = PALETTE[i % PALETTE.len()];
                    chart
                        .draw_series(LineSeries::new(pts.iter().copied(), color.stroke_width(2)))
                        .map_err(err)?
                        .label(label.as_str())
                        .legend(move |(x, y)| {
                            PathElement::new(vec![(x, y), (x + 16, y)], color.stroke_width(2))
                        });
                    chart
                        .draw_series(pts.iter().map(|&p| Circle::new(p, 3, color.filled())))
                        .map_err(err)?;
                }
                draw_legend(&mut chart, SeriesLabelPosition::UpperLeft, 11.0)?;
            }};
        }
        if log {
            draw!(builder
                .build_cartesian_2d((xr.0..xr.1).log_scale(), (yr.0..yr.1).log_scale())
                .map_err(err)?);
        } else {
            draw!(builder
                .build_cartesian_2d(xr.0..xr.1, yr.0..yr.1)
                .map_err(err)?);
        }
    }
    root.present().map_err(err)
}

/// `lkcs plot`: line plots of a CSV.
#[derive(clap::Args)]
pub(crate) struct PlotArgs {
    /// The CSV: a header row, then one row per point; plain comma-separated fields.
    pub(crate) csv: std::path::PathBuf,
    /// The column of the x axis.
    #[arg(long)]
    pub(crate) x: String,
    /// A column whose values split the rows into one line each (e.g. the system).
    #[arg(long)]
    pub(crate) by: Option<String>,
    /// A panel: `TITLE|Y AXIS|COLUMN,COLUMN...` (repeat for more panels, side by side).
    #[arg(long, required = true)]
    pub(crate) panel: Vec<String>,
    /// Logarithmic x and y axes.
    #[arg(long)]
    pub(crate) log: bool,
    /// The SVG file to write.
    #[arg(long)]
    pub(crate) out: std::path::PathBuf,
}

/// Runs `lkcs plot`: exit 0 with the SVG written, 2 on bad input.
pub(crate) fn run(args: &PlotArgs) -> std::process::ExitCode {
    match plot_csv(args) {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            std::process::ExitCode::from(2)
        }
    }
}

fn plot_csv(args: &PlotArgs) -> Result<(), String> {
    let text = std::fs::read_to_string(&args.csv)
        .map_err(|e| format!("cannot read {}: {e}", args.csv.display()))?;
    if text.contains('"') {
        return Err("quoted CSV fields are not supported".into());
    }
    let mut lines_of = text.lines().filter(|l| !l.trim().is_empty());
    let split = |l: &str| {
        l.split(',')
            .map(|f| f.trim().to_string())
            .collect::<Vec<_>>()
    };
    let header = split(lines_of.next().ok_or("the CSV is empty")?);
    let rows: Vec<Vec<String>> = lines_of.map(split).collect();
    let panels = args
        .panel
        .iter()
        .map(|p| {
            let f: Vec<&str> = p.split('|').collect();
            match f.as_slice() {
                [title, y, cols] => Ok(Panel {
                    title: (*title).to_string(),
                    y_desc: (*y).to_string(),
                    columns: cols.split(',').map(|c| c.trim().to_string()).collect(),
                }),
                _ => Err(format!(
                    "--panel `{p}`: expected TITLE|Y AXIS|COLUMN,COLUMN..."
                )),
            }
        })
        .collect::<Result<Vec<_>, _>>()?;
    lines(
        &args.out,
        &header,
        &rows,
        &args.x,
        args.by.as_deref(),
        &panels,
        args.log,
    )
}
