package dev.hyspec.bench;

import dev.hyspec.bench.BenchData.DecodeRow;
import dev.hyspec.bench.BenchData.StateRow;
import dev.hyspec.bench.BenchTargets.Target;
import java.awt.Color;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.LocalDate;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.TreeMap;
import java.util.TreeSet;

/**
 * Writes {@code BENCHMARKS.md} and its PNG plots from the JSON of the state-update and decode
 * benchmarks: the machine, how to reproduce, the DESIGN §10 targets marked met or missed, the
 * tables, and the plots (state update µs against batch with the floors, replay's speed-up over
 * intermediate-copy, decode tokens/s against batch). Either file may be missing.
 *
 * <pre>
 * args: [--state FILE.json] [--decode FILE.json] --out DIR
 * </pre>
 */
public final class BenchReport {
    static final String REPRODUCE = """
            scripts/device/bench.sh stage .device-bench        # here: build and pack (JRE, classes, jars)
            # on the GPU machine, through the device tool (carry [".device-bench"]):
            bash scripts/device/bench.sh run .device-bench all  # writes state-update.json, decode.json, tables, report/
            # or here, from the returned JSON:
            java -cp ".device-bench/classes:.device-bench/lib/*" dev.hyspec.bench.BenchReport \\
                --state state-update.json --decode decode.json --out DIR""";

    private BenchReport() {}

    public static void main(String[] args) throws IOException {
        Path state = null;
        Path decode = null;
        Path out = null;
        for (int i = 0; i < args.length; i++) {
            switch (args[i]) {
                case "--state" -> state = Path.of(args[++i]);
                case "--decode" -> decode = Path.of(args[++i]);
                case "--out" -> out = Path.of(args[++i]);
                default -> {
                    System.err.println("unknown argument " + args[i]);
                    out = null;
                    i = args.length;
                }
            }
        }
        if (out == null) {
            System.err.println("usage: BenchReport [--state FILE.json] [--decode FILE.json] --out DIR");
            System.exit(2);
        }
        List<Target> targets = write(state, decode, out);
        for (Target t : targets) {
            System.out.printf(Locale.ROOT, "[report] %-12s %s: %s%n", t.verdict().label, t.text(), t.measured());
        }
        System.out.println("[report] wrote " + out.resolve("BENCHMARKS.md"));
    }

    /** Writes DIR/BENCHMARKS.md and the plots; returns the judged targets. */
    static List<Target> write(Path stateFile, Path decodeFile, Path dir) throws IOException {
        Files.createDirectories(dir);
        BenchData d = BenchData.read(stateFile, decodeFile);
        List<Target> targets = BenchTargets.judge(d);
        StringBuilder md = new StringBuilder("# hyspec benchmarks\n\n");
        md.append("Report written ").append(LocalDate.now()).append(" from ")
                .append(stateFile == null ? "no state-update results" : "`" + stateFile.getFileName() + "`")
                .append(" and ").append(decodeFile == null ? "no decode results" : "`" + decodeFile.getFileName() + "`")
                .append(d.date().isEmpty() ? "" : " (measured " + d.date() + ")")
                .append(d.quick() ? "; **a --quick smoke run: fewer batches and timed calls**" : "").append(".\n\n");
        for (String p : d.problems()) {
            md.append("> ").append(p).append("\n\n");
        }
        md.append("## Machine\n\n| | |\n|---|---|\n")
                .append("| GPU | ").append(or(d.machine().gpu(), "unknown")).append(" |\n")
                .append("| Driver | ").append(or(d.machine().driver(), "unknown")).append(" |\n")
                .append("| Device copy bandwidth (read + write) | ")
                .append(Double.isFinite(d.copyBandwidthGBs()) ? fmt("%.0f GB/s", d.copyBandwidthGBs()) : "unknown")
                .append(" |\n\n");
        md.append("## Reproduce\n\n```\n").append(REPRODUCE).append("\n```\n\n");
        md.append("## DESIGN §10 targets\n\n| target | verdict | measured |\n|---|---|---|\n");
        for (Target t : targets) {
            md.append("| ").append(t.text()).append(" | **").append(t.verdict().label).append("** | ")
                    .append(t.measured()).append(" |\n");
        }
        md.append('\n');
        Plots plots = new Plots(dir);
        stateSection(md, d, plots);
        decodeSection(md, d, plots);
        if (plots.failure != null) {
            md.append("> The plots were not drawn here: ").append(plots.failure)
                    .append(". Run BenchReport on a machine with fonts (see Reproduce).\n");
        }
        Files.writeString(dir.resolve("BENCHMARKS.md"), md.toString());
        return targets;
    }

    private static void stateSection(StringBuilder md, BenchData d, Plots plots) throws IOException {
        md.append("## Recurrent-state update\n\n");
        if (d.state().isEmpty()) {
            md.append("Not measured.\n\n");
            return;
        }
        md.append("""
                Median device time per call of the batched operation (R rows of T tokens), against its floor: the \
                bytes it must move at the measured copy bandwidth (replay and decode `2·|S|` per row, \
                intermediate-copy `(1+T)·|S| + 2·|S|`, plus token inputs, outputs and history). Replay/IC is \
                replay's speed-up over intermediate-copy. Mamba2: Nemotron-H-8B layer (H=128, P=64, N=128, G=8), \
                Gated DeltaNet: Qwen3.5 layer (Hk=16, Hv=32, Dk=Dv=128); float32 state. *host-bound*: the \
                device caught up with the host while the calls were issued, so the figure includes time it \
                spent waiting for launches.

                """);
        for (String arch : distinct(d.state().stream().map(StateRow::arch).toList())) {
            md.append("### ").append(arch).append("\n\n| op | layout | T | batch | median µs | floor µs | ratio | GB/s "
                    + "| replay/IC | note |\n|---|---|---|---|---|---|---|---|---|---|\n");
            for (StateRow r : d.state()) {
                if (!r.arch().equals(arch)) {
                    continue;
                }
                double s = speedup(d, r);
                List<String> notes = new ArrayList<>();
                if (r.hostBound()) {
                    notes.add("host-bound");
                }
                if (!d.checkPassed(r)) {
                    notes.add("**correctness check failed**");
                }
                if (!Double.isNaN(r.copyUs())) {
                    notes.add(fmt("copy of the same bytes %.1f µs = %.2f× floor; replay = %.2f× that copy", r.copyUs(),
                            r.copyUs() / r.floorUs(), r.medianUs() / r.copyUs()));
                }
                md.append(fmt("| %s | %s | %d | %d | %.1f | %.1f | %.2f | %.0f | %s | %s |\n", r.op(), r.layout(),
                        r.tokens(), r.batch(), r.medianUs(), r.floorUs(), r.ratio(), r.achievedGBs(),
                        Double.isNaN(s) ? "" : fmt("%.2f×", s), String.join(", ", notes)));
            }
            md.append('\n');
            for (int t : distinctInts(d.state().stream().filter(r -> r.arch().equals(arch)).map(StateRow::tokens).toList())) {
                String png = "state-" + arch + "-T" + t + ".png";
                if (plots.write(stateChart(d, arch, t), png)) {
                    md.append("![").append(arch).append(" T=").append(t).append("](").append(png).append(")\n\n");
                }
            }
            String png = "speedup-" + arch + ".png";
            if (plots.write(speedupChart(d, arch), png)) {
                md.append("![").append(arch).append(" replay speed-up](").append(png).append(")\n\n");
            }
        }
        if (!d.checks().isEmpty()) {
            md.append("Correctness spot checks (2 rows against the CPU reference, after timing):\n\n"
                    + "| arch | op | layout | relative error | |\n|---|---|---|---|---|\n");
            for (BenchData.Check c : d.checks()) {
                md.append(fmt("| %s | %s | %s | %.2e | %s |\n", c.arch(), c.op(), c.layout(), c.relativeError(),
                        c.passed() ? "ok" : "**failed**"));
            }
            md.append('\n');
        }
    }

    private static void decodeSection(StringBuilder md, BenchData d, Plots plots) throws IOException {
        md.append("## End-to-end decode\n\n");
        if (d.decode().isEmpty()) {
            md.append("Not measured.\n\n");
            return;
        }
        md.append("Random bf16 weights made on the GPU; floor = weight bytes (plus state) at the measured copy "
                + "bandwidth.\n\n| model | mode | k | batch | tokens/s | step ms | floor ms | ratio | acceptance |\n"
                + "|---|---|---|---|---|---|---|---|---|\n");
        for (DecodeRow r : d.decode()) {
            md.append(fmt("| %s | %s | %d | %d | %.1f | %.3f | %.3f | %.2f | %s |\n", r.model(), r.mode(), r.k(),
                    r.batch(), r.tokensPerSecond(), r.stepMs(), r.floorMs(), r.ratio(),
                    Double.isNaN(r.acceptanceRate()) ? "" : fmt("%.2f", r.acceptanceRate())));
        }
        md.append('\n');
        for (String model : distinct(d.decode().stream().map(DecodeRow::model).toList())) {
            String png = "decode-" + model + ".png";
            if (plots.write(decodeChart(d, model), png)) {
                md.append("![").append(model).append(" decode](").append(png).append(")\n\n");
            }
        }
    }

    /** µs against batch for every (op, layout) of {@code arch} at {@code tokens}, each with its floor dashed. */
    private static LineChart stateChart(BenchData d, String arch, int tokens) {
        LineChart c = new LineChart(fmt("%s state update, T = %d (median device time; dashed: floor)", arch, tokens),
                "batch (rows)", "µs per call", true, true);
        Map<String, List<StateRow>> byOp = new LinkedHashMap<>();
        for (StateRow r : d.state()) {
            if (r.arch().equals(arch) && r.tokens() == tokens) {
                byOp.computeIfAbsent(r.op() + (r.layout().isEmpty() ? "" : " " + r.layout()), k -> new ArrayList<>())
                        .add(r);
            }
        }
        int i = 0;
        Map<String, Color> floorDrawn = new LinkedHashMap<>();   // an op's floor is the same in every layout
        for (Map.Entry<String, List<StateRow>> e : byOp.entrySet()) {
            Color color = LineChart.PALETTE[i++ % LineChart.PALETTE.length];
            List<StateRow> rows = e.getValue();
            double[] x = rows.stream().mapToDouble(StateRow::batch).toArray();
            c.add(new LineChart.Series(e.getKey(), color, false, x, rows.stream().mapToDouble(StateRow::medianUs).toArray()));
            String op = rows.get(0).op();
            if (floorDrawn.putIfAbsent(op, color) == null) {
                c.add(new LineChart.Series(op + " floor", color, true, x,
                        rows.stream().mapToDouble(StateRow::floorUs).toArray()));
            }
        }
        return c;
    }

    private static LineChart speedupChart(BenchData d, String arch) {
        LineChart c = new LineChart(arch + ": replay speed-up over intermediate-copy", "batch (rows)",
                "intermediate-copy µs / replay µs", true, false);
        int i = 0;
        for (int t : distinctInts(d.state().stream().map(StateRow::tokens).toList())) {
            List<double[]> points = new ArrayList<>();
            for (StateRow r : d.state()) {
                double s = r.arch().equals(arch) && r.tokens() == t ? speedup(d, r) : Double.NaN;
                if (!Double.isNaN(s)) {
                    points.add(new double[] {r.batch(), s});
                }
            }
            c.add(new LineChart.Series("T = " + t, LineChart.PALETTE[i++ % 8], false,
                    points.stream().mapToDouble(p -> p[0]).toArray(), points.stream().mapToDouble(p -> p[1]).toArray()));
        }
        if (arch.equals(BenchTargets.MAMBA2)) {
            c.reference("target at T = 4, batch ≥ 64: 3×", 3);
        }
        return c;
    }

    /** Tokens/s against batch per mode (its best k at each batch). */
    private static LineChart decodeChart(BenchData d, String model) {
        LineChart c = new LineChart(model + ": decode tokens/s (best k per mode)", "batch (rows)", "tokens/s", true, true);
        int i = 0;
        for (String mode : distinct(d.decode().stream().filter(r -> r.model().equals(model)).map(DecodeRow::mode).toList())) {
            Map<Integer, Double> best = new TreeMap<>();
            for (DecodeRow r : d.decode()) {
                if (r.model().equals(model) && r.mode().equals(mode) && Double.isFinite(r.tokensPerSecond())) {
                    best.merge(r.batch(), r.tokensPerSecond(), Math::max);
                }
            }
            c.add(new LineChart.Series(mode, LineChart.PALETTE[i++ % 8], false,
                    best.keySet().stream().mapToDouble(Integer::doubleValue).toArray(),
                    best.values().stream().mapToDouble(Double::doubleValue).toArray()));
        }
        return c;
    }

    /**
     * Writes charts that have data into the report's folder. Text needs the font libraries of the
     * Java runtime (the device machine lacks them): when those fail to load, no further chart is
     * tried and {@link #failure} says why.
     */
    private static final class Plots {
        private final Path dir;
        private String failure;

        Plots(Path dir) {
            this.dir = dir;
        }

        boolean write(LineChart chart, String png) throws IOException {
            if (failure != null || chart.isEmpty()) {
                return false;
            }
            try {
                chart.write(dir.resolve(png));
                return true;
            } catch (LinkageError | InternalError e) {
                failure = "Java2D cannot draw text (" + e + ")";
                return false;
            }
        }
    }

    /** Replay's speed-up over intermediate-copy for a replay row with an intermediate-copy twin, else NaN. */
    private static double speedup(BenchData d, StateRow r) {
        if (!r.op().equals("replay")) {
            return Double.NaN;
        }
        return d.state().stream().filter(c -> c.op().equals("intermediate-copy") && c.arch().equals(r.arch())
                        && c.layout().equals(r.layout()) && c.tokens() == r.tokens() && c.batch() == r.batch())
                .mapToDouble(c -> c.medianUs() / r.medianUs()).findFirst().orElse(Double.NaN);
    }

    private static List<String> distinct(List<String> xs) {
        return new ArrayList<>(new LinkedHashSet<>(xs));
    }

    private static List<Integer> distinctInts(List<Integer> xs) {
        return new ArrayList<>(new TreeSet<>(xs));
    }

    private static String or(String s, String fallback) {
        return s == null || s.isBlank() ? fallback : s;
    }

    private static String fmt(String f, Object... args) {
        return String.format(Locale.ROOT, f, args);
    }
}
