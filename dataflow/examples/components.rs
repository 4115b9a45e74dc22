//! Connected components of a duplicate-like graph, by the union-find and by sorting on disk
//! (`neardup_dataflow::stages::components`), timed side by side: what worker 0 pays when
//! the clustered documents pass the union-find's share of the limit.
//!
//! ```text
//! cargo run --release -p neardup-dataflow --example components -- EDGES [BUDGET_MB] [DIR]
//! ```
//!
//! The graph: clusters of 2 to 64 documents (sizes drawn so that small ones are common, as
//! in a crawl's duplicates), each a random tree over its documents, whose ids are
//! scattered over 64 bits. One JSON line: the edges, documents, the seconds of each method,
//! the rounds, the bytes the sorts wrote, and whether the two agree on every component.

use std::time::Instant;

use neardup_core::mix::mix64;
use neardup_core::unionfind::SortedUnionFind;
use neardup_dataflow::stages::components::ComponentsOnDisk;
use neardup_io::spill::ExternalSort;

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let edges: u64 = args
        .get(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(1_000_000);
    let budget_mb: usize = args.get(2).and_then(|a| a.parse().ok()).unwrap_or(20);
    let dir = args
        .get(3)
        .map(std::path::PathBuf::from)
        .unwrap_or_else(std::env::temp_dir)
        .join(format!("neardup-components-{}", std::process::id()));

    // Clusters until there are `edges` edges: a cluster of s documents has s - 1.
    let mut graph = Vec::with_capacity(edges as usize);
    let mut next = 0u64;
    let mut draw = 0u64;
    while (graph.len() as u64) < edges {
        draw += 1;
        let size = 2 + (64.0 * (mix64(draw) as f64 / u64::MAX as f64).powi(3)) as u64;
        let docs: Vec<u64> = (next..next + size)
            .map(|i| mix64(i ^ 0x5eed) >> 1)
            .collect();
        next += size;
        for (i, &doc) in docs.iter().enumerate().skip(1) {
            let parent = docs[(mix64(doc) % i as u64) as usize];
            graph.push((parent, doc));
        }
    }
    let documents = next;

    let started = Instant::now();
    let mut ids: Vec<u64> = graph.iter().flat_map(|&(a, b)| [a, b]).collect();
    ids.sort_unstable();
    ids.dedup();
    let mut uf = SortedUnionFind::new(ids.clone());
    for &(a, b) in &graph {
        uf.union(a, b);
    }
    // Each document's smallest fellow, as the sorts give it.
    let mut smallest = std::collections::HashMap::new();
    for &id in &ids {
        let root = uf.find(id);
        let e = smallest.entry(root).or_insert(id);
        *e = (*e).min(id);
    }
    let in_memory = started.elapsed().as_secs_f64();

    let started = Instant::now();
    let budget = budget_mb << 20;
    let (large, small) = (dir.join("large"), dir.join("small"));
    let mut cc = ComponentsOnDisk::new(|l| {
        ExternalSort::new(if l { large.clone() } else { small.clone() }, budget)
    });
    for &(a, b) in &graph {
        cc.add(a, b).expect("disk");
    }
    let (labels, rounds) = cc.finish().expect("disk");
    let mut cursor = labels.cursor().expect("disk");
    let mut agree = true;
    for &id in &ids {
        agree &= cursor.component(id).expect("disk") == smallest[&uf.find(id)];
    }
    let on_disk = started.elapsed().as_secs_f64();
    drop((cursor, labels));
    let _ = std::fs::remove_dir_all(&dir);
    println!(
        "{{\"edges\": {}, \"documents\": {documents}, \"budget_mb\": {budget_mb}, \"union_find_s\": {in_memory:.3}, \"on_disk_s\": {on_disk:.3}, \"rounds\": {}, \"spilled_bytes\": {}, \"agree\": {agree}}}",
        graph.len(),
        rounds.rounds,
        rounds.large.spilled_bytes + rounds.small.spilled_bytes,
    );
}
