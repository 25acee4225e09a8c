//! The timeline: requests per time bucket, its width picked from a ladder so that the
//! bars fit.

use std::fmt::Write as _;

use crate::digest::items::Counts;
use crate::digest::{self, Digest};

/// The bucket width to draw: the narrowest on the ladder giving at most `max` bars.
pub(super) fn draw_width(d: &Digest, max: i64) -> i64 {
    let (Some(&a), Some(&b)) = (d.timeline.keys().next(), d.timeline.keys().next_back()) else {
        return d.bucket;
    };
    digest::BUCKET_LADDER
        .iter()
        .copied()
        .filter(|&w| w >= d.bucket)
        .find(|&w| b.div_euclid(w) - a.div_euclid(w) < max)
        .unwrap_or(
            d.bucket
                .max(digest::BUCKET_LADDER[digest::BUCKET_LADDER.len() - 1]),
        )
}

pub(super) fn bucket_label(t: i64, width: i64) -> String {
    let Ok(t) = time::OffsetDateTime::from_unix_timestamp(t) else {
        return t.to_string();
    };
    let (date, hm) = (t.date(), (t.hour(), t.minute()));
    let name = match width {
        ..60 => return format!("{date} {:02}:{:02}:{:02} UTC", hm.0, hm.1, t.second()),
        60..3600 => "min",
        3600..86400 => "h",
        86400 => "day",
        _ => "week",
    };
    format!("{date} {:02}:{:02} UTC ({name})", hm.0, hm.1)
}

pub(super) fn timeline_section(o: &mut String, d: &Digest) {
    o.push_str("<section id=\"timeline\"><h2>Timeline of requests</h2>\n");
    let width = draw_width(d, 120);
    let buckets = digest::rebucket(&d.timeline, width);
    let (Some(&a), Some(&b)) = (buckets.keys().next(), buckets.keys().next_back()) else {
        o.push_str("<p>No requests.</p></section>\n");
        return;
    };
    let n = (b - a) / width + 1;
    let max = buckets
        .values()
        .map(Counts::total)
        .max()
        .unwrap_or(1)
        .max(1);
    let (w, h, top, base) = (960.0_f64, 190.0_f64, 12.0_f64, 160.0_f64);
    // At least 24 slots, so that a short log does not draw one wall-wide bar.
    let slots = n.max(24);
    let bar = (w - 60.0) / slots as f64;
    let _ = write!(
        o,
        "<svg xmlns=\"http://www.w3.org/2000/svg\" viewBox=\"0 0 {w} {h}\" role=\"img\" \
         aria-label=\"requests per {}\" class=\"chart\">\n\
         <line class=\"axis\" x1=\"50\" y1=\"{base}\" x2=\"{}\" y2=\"{base}\"/>\n\
         <text x=\"44\" y=\"{}\" class=\"lbl\" text-anchor=\"end\">{max}</text>\n\
         <text x=\"44\" y=\"{base}\" class=\"lbl\" text-anchor=\"end\">0</text>\n",
        bucket_label(a, width),
        w - 10.0,
        top + 10.0
    );
    for (t, c) in &buckets {
        let x = 50.0 + ((t - a) / width) as f64 * bar;
        let _ = write!(
            o,
            "<g><title>{}: {} allowed, {} refused, {} failed</title>",
            bucket_label(*t, width),
            c.ok,
            c.refused,
            c.failed
        );
        let mut y = base;
        for (count, class) in [
            (c.ok, "b-ok"),
            (c.failed, "b-failed"),
            (c.refused, "b-refused"),
        ] {
            let bh = (base - top) * count as f64 / max as f64;
            if bh > 0.0 {
                y -= bh;
                let _ = write!(
                    o,
                    "<rect class=\"{class}\" x=\"{x:.2}\" y=\"{y:.2}\" width=\"{:.2}\" height=\"{bh:.2}\"/>",
                    (bar * 0.85).max(0.5)
                );
            }
        }
        o.push_str("</g>\n");
    }
    let _ = write!(
        o,
        "<text x=\"50\" y=\"180\" class=\"lbl\">{}</text>\n\
         <text x=\"{}\" y=\"180\" class=\"lbl\" text-anchor=\"end\">{}</text>\n</svg>\n\
         <p class=\"legend\"><span class=\"k b-ok\"></span> allowed <span class=\"k b-failed\"></span> failed \
         <span class=\"k b-refused\"></span> refused, per {}</p></section>\n",
        bucket_label(a, width),
        w - 10.0,
        bucket_label(a + (slots - 1) * width, width),
        match width {
            ..60 => format!("{width} s"),
            60..3600 => format!("{} min", width / 60),
            3600..86400 => format!("{} h", width / 3600),
            86400 => "day".into(),
            _ => "week".into(),
        }
    );
}
