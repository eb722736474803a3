package dev.hyspec.bench;

import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import dev.hyspec.backend.Tensor;
import dev.hyspec.backend.cuda.CudaBackend;
import dev.hyspec.backend.cuda.CudaRuntime;
import dev.hyspec.backend.cuda.EventTimer;
import java.io.IOException;
import java.io.PrintStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Optional;

/**
 * {@code Backend.matmul} on the GPU in BF16 precision (the bf16 tensor-core GEMM) at the product
 * shapes of Nemotron-H-8B ({@code bench/nemotron-h-8b.json}: Mamba2 z / xBC / dt / out projections,
 * MLP up / down, attention q·o / k·v, the LM head) for M ∈ {16 … 512} rows, against its floor.
 *
 * <p>Each figure is the median device time (CUDA events) per call of several calls queued behind a
 * large copy, so the host's launch cost is hidden (a figure where the queue drained anyway is marked
 * host-bound); each call takes the next of several random bf16 weight sets, at least 192 MiB in all,
 * so L2 (50 MB) cannot hold the weights the next call reads. Plans (the {@code hyspec.gemm.plan}
 * system property of the CUDA backend): {@code auto} (what serving runs), {@code legacy} (the
 * earlier matmul_tc_bf16) and, in a full run, every tile forced.
 *
 * <p>Floor of a product: max(weight bytes ÷ device copy bandwidth, FLOPs ÷ peak), the copy bandwidth
 * measured in the same run (1 GiB copy, read + write counted) and the peak the best TFLOPS any
 * {@code auto} figure of this run reached (a measured reference, not a data-sheet number).
 * Per-step totals weigh each shape by its count in one forward step of the model.
 *
 * <pre>
 * args: --out FILE.json [--quick]    (--quick: M 64 and 256, plans auto and legacy: a smoke test)
 * </pre>
 * Run on the device through {@code scripts/device/bench.sh run STAGE matmul}.
 */
public final class MatmulBench {
    /** A weight shape [n, k] and how many products of it one forward step of the model runs. */
    record Shape(String name, int n, int k, int perStep) {
        long weightBytes() {
            return 2L * n * k;
        }
    }

    // Nemotron-H-8B: 24 Mamba2, 24 MLP and 4 attention layers, hidden 4096, 128 heads × 64,
    // 8 groups × 128 state, MLP 21504, 32 q / 8 kv heads × 128, vocabulary 131072.
    static final List<Shape> SHAPES = List.of(
            new Shape("mamba.z", 8192, 4096, 24),
            new Shape("mamba.xBC", 10240, 4096, 24),
            new Shape("mamba.dt", 128, 4096, 24),
            new Shape("mamba.out", 4096, 8192, 24),
            new Shape("mlp.up", 21504, 4096, 24),
            new Shape("mlp.down", 4096, 21504, 24),
            new Shape("attn.q/o", 4096, 4096, 8),
            new Shape("attn.k/v", 1024, 4096, 8),
            new Shape("lm_head", 131072, 4096, 1));
    static final int[] ROWS = {16, 32, 64, 128, 256, 512};
    static final int[] QUICK_ROWS = {64, 256};
    static final List<String> PLANS = List.of("auto", "legacy", "64x128", "128x128", "128x256");
    static final List<String> QUICK_PLANS = List.of("auto", "legacy");
    private static final String PLAN_PROPERTY = "hyspec.gemm.plan";
    private static final long MIN_WEIGHT_BYTES = 192L << 20;
    private static final long COPY_BYTES = 1L << 30;

    record Result(Shape shape, int m, String plan, double medianUs, int runs, boolean hostBound) {
        double flops() {
            return 2.0 * m * shape.n() * shape.k();
        }

        double tflops() {
            return flops() / (medianUs * 1e6);
        }

        double weightGBs() {
            return shape.weightBytes() / (medianUs * 1e3);
        }
    }

    private final CudaBackend gpu;
    private final EventTimer timer;
    private final RandomPool random;
    private final long seed;
    private final double budgetMs;
    private final int maxRuns;
    private Tensor copyA;
    private Tensor copyB;

    private MatmulBench(CudaBackend gpu, boolean quick, long seed) {
        this.gpu = gpu;
        this.timer = gpu.timer();
        this.random = new RandomPool(seed, 1 << 22);
        this.seed = seed;
        this.budgetMs = quick ? 10 : 30;
        this.maxRuns = quick ? 12 : 32;
    }

    public static void main(String[] args) throws IOException {
        Path out = null;
        boolean quick = false;
        for (int i = 0; i < args.length; i++) {
            switch (args[i]) {
                case "--out" -> out = Path.of(args[++i]);
                case "--quick" -> quick = true;
                default -> usage("unknown argument " + args[i]);
            }
        }
        if (out == null) {
            usage("--out is required");
        }
        Optional<String> missing = CudaRuntime.unavailableReason();
        if (missing.isPresent()) {
            System.err.println("MatmulBench needs a CUDA device: " + missing.get());
            System.exit(2);
        }
        long seed = System.nanoTime();
        System.out.println("[matmul] seed " + seed + (quick ? ", quick run" : ""));
        try (CudaBackend gpu = new CudaBackend(CudaBackend.Precision.BF16)) {
            new MatmulBench(gpu, quick, seed).run(out, quick);
        } finally {
            System.clearProperty(PLAN_PROPERTY);
        }
    }

    private static void usage(String why) {
        System.err.println(why + "\nusage: MatmulBench --out FILE.json [--quick]");
        System.exit(2);
    }

    private void run(Path out, boolean quick) throws IOException {
        long t0 = System.nanoTime();
        double bandwidth = copyBandwidth();
        System.out.printf(Locale.ROOT, "[matmul] %s: device copy bandwidth %.0f GB/s (1 GiB copy, read + write)%n",
                gpu.deviceName(), bandwidth / 1e9);
        int[] rows = quick ? QUICK_ROWS : ROWS;
        List<String> plans = quick ? QUICK_PLANS : PLANS;
        List<Result> results = new ArrayList<>();
        for (Shape s : SHAPES) {
            measure(s, rows, plans, results);
        }
        gpu.free(copyA);
        gpu.free(copyB);
        double peak = results.stream().filter(r -> r.plan().equals("auto")).mapToDouble(Result::tflops).max()
                .orElse(Double.NaN);
        double seconds = (System.nanoTime() - t0) / 1e9;
        print(System.out, results, rows, plans, bandwidth, peak);
        writeJson(out, results, rows, plans, bandwidth, peak, quick, seconds);
        System.out.printf(Locale.ROOT, "[matmul] wrote %s (%.0f s)%n", out, seconds);
    }

    private double copyBandwidth() {
        int cols = 1 << 20;
        int rows = (int) (COPY_BYTES / 4 / cols);
        copyA = gpu.zeros(rows, cols);
        copyB = gpu.zeros(rows, cols);
        return 2.0 * COPY_BYTES / (GpuBench.copyMillis(gpu, timer, copyA, copyB, 9) / 1e3);
    }

    private void measure(Shape s, int[] rows, List<String> plans, List<Result> results) {
        int sets = (int) Math.max(2, Math.min(96, (MIN_WEIGHT_BYTES + s.weightBytes() - 1) / s.weightBytes()));
        Tensor[] w = new Tensor[sets];
        for (int i = 0; i < sets; i++) {
            w[i] = gpu.randomWeight(seed + 1_000_003L * s.n() + i, 0f, (float) (1 / Math.sqrt(s.k())), s.n(), s.k());
        }
        for (int m : rows) {
            Tensor x = gpu.upload(random.take(m * s.k(), 1f), m, s.k());
            Tensor y = gpu.zeros(m, s.n());
            for (String plan : plans) {
                if (plan.equals("auto")) {
                    System.clearProperty(PLAN_PROPERTY);
                } else {
                    System.setProperty(PLAN_PROPERTY, plan);
                }
                long wall = System.nanoTime();
                Result r = time(s, m, plan, x, w, y);
                results.add(r);
                System.out.printf(Locale.ROOT,
                        "[matmul] %-9s %6d x %5d M=%3d %-7s: %9.1f us %6.1f TFLOPS %6.0f GB/s%s (%d calls, %.2f s)%n",
                        s.name(), s.n(), s.k(), m, plan, r.medianUs(), r.tflops(), r.weightGBs(),
                        r.hostBound() ? " HOST-BOUND" : "", r.runs(), (System.nanoTime() - wall) / 1e9);
            }
            System.clearProperty(PLAN_PROPERTY);
            gpu.free(x);
            gpu.free(y);
        }
        for (Tensor t : w) {
            gpu.free(t);
        }
    }

    /** Median device µs per call; samples of a few calls queued behind a 1 GiB copy. */
    private Result time(Shape s, int m, String plan, Tensor x, Tensor[] w, Tensor y) {
        int[] next = {0};
        Runnable one = () -> {
            gpu.matmul(x, w[next[0]], null, y);
            next[0] = (next[0] + 1) % w.length;
        };
        one.run();
        gpu.synchronize();
        long t0 = System.nanoTime();
        for (int i = 0; i < 3; i++) {
            one.run();
        }
        gpu.synchronize();
        double callMs = (System.nanoTime() - t0) / 3e6;
        int runs = (int) Math.max(8, Math.min(maxRuns, budgetMs / callMs));
        int perSample = 4;
        int samples = (runs + perSample - 1) / perSample;
        GpuBench.Timed t = GpuBench.sample(gpu, timer, one, copyA, copyB, samples, perSample, 1);
        return new Result(s, m, plan, t.medianUs(), t.runs(), t.hostBound());
    }

    private static double floorUs(Result r, double bandwidth, double peakTflops) {
        return Math.max(r.shape().weightBytes() / bandwidth * 1e6, r.flops() / (peakTflops * 1e12) * 1e6);
    }

    private static Result find(List<Result> results, Shape s, int m, String plan) {
        return results.stream().filter(r -> r.shape() == s && r.m() == m && r.plan().equals(plan)).findFirst()
                .orElse(null);
    }

    /** Σ over shapes of perStep × µs, in ms: the matmul time of one forward step of M rows. */
    private static double stepMs(List<Result> results, int m, String plan) {
        double us = 0;
        for (Shape s : SHAPES) {
            Result r = find(results, s, m, plan);
            if (r == null) {
                return Double.NaN;
            }
            us += s.perStep() * r.medianUs();
        }
        return us / 1e3;
    }

    private static double stepFloorMs(int m, double bandwidth, double peak) {
        double us = 0;
        for (Shape s : SHAPES) {
            us += s.perStep() * floorUs(new Result(s, m, "", 1, 0, false), bandwidth, peak);
        }
        return us / 1e3;
    }

    static void print(PrintStream out, List<Result> results, int[] rows, List<String> plans, double bandwidth,
                      double peak) {
        out.printf(Locale.ROOT, "%n[matmul] floor = max(weight bytes / %.0f GB/s copy bandwidth, FLOPs / %.1f TFLOPS"
                + " = the best auto figure of this run)%n", bandwidth / 1e9, peak);
        StringBuilder head = new StringBuilder(String.format(Locale.ROOT, "%-9s %6s %5s %3s", "shape", "N", "K", "M"));
        for (String p : plans) {
            head.append(String.format(Locale.ROOT, " %9s", p));
        }
        head.append(String.format(Locale.ROOT, " %7s %7s %7s %9s %6s", "legacy/", "TFLOPS", "GB/s", "floor", "auto/"));
        out.println(head);
        out.println(String.format(Locale.ROOT, "%-9s %6s %5s %3s", "", "", "", "")
                + String.format(Locale.ROOT, " %" + (10 * plans.size() - 1) + "s", "(µs per call)")
                + String.format(Locale.ROOT, " %7s %7s %7s %9s %6s", "auto", "auto", "auto", "µs", "floor"));
        for (Shape s : SHAPES) {
            for (int m : rows) {
                StringBuilder line = new StringBuilder(String.format(Locale.ROOT, "%-9s %6d %5d %3d", s.name(), s.n(),
                        s.k(), m));
                for (String p : plans) {
                    Result r = find(results, s, m, p);
                    line.append(r == null ? String.format(Locale.ROOT, " %9s", "-")
                            : String.format(Locale.ROOT, " %9.1f", r.medianUs()));
                }
                Result auto = find(results, s, m, "auto");
                Result legacy = find(results, s, m, "legacy");
                if (auto != null) {
                    double floor = floorUs(auto, bandwidth, peak);
                    line.append(String.format(Locale.ROOT, " %6.2fx %7.1f %7.0f %9.1f %5.2fx%s",
                            legacy == null ? Double.NaN : legacy.medianUs() / auto.medianUs(), auto.tflops(),
                            auto.weightGBs(), floor, auto.medianUs() / floor, auto.hostBound() ? " HOST-BOUND" : ""));
                }
                out.println(line);
            }
        }
        out.println();
        out.println("[matmul] per forward step of M rows (Σ shapes × count per step), ms:");
        StringBuilder h = new StringBuilder(String.format(Locale.ROOT, "%5s", "M"));
        for (String p : plans) {
            h.append(String.format(Locale.ROOT, " %9s", p));
        }
        out.println(h.append(String.format(Locale.ROOT, " %9s", "floor")));
        for (int m : rows) {
            StringBuilder line = new StringBuilder(String.format(Locale.ROOT, "%5d", m));
            for (String p : plans) {
                line.append(String.format(Locale.ROOT, " %9.2f", stepMs(results, m, p)));
            }
            out.println(line.append(String.format(Locale.ROOT, " %9.2f", stepFloorMs(m, bandwidth, peak))));
        }
    }

    private void writeJson(Path out, List<Result> results, int[] rows, List<String> plans, double bandwidth,
                           double peak, boolean quick, double seconds) throws IOException {
        ObjectMapper json = new ObjectMapper();
        ObjectNode root = GpuBench.jsonRoot(json, gpu, quick, bandwidth, seconds);
        root.put("peakTflops", GpuBench.round(peak, 1));
        root.put("peakNote", "best TFLOPS of any auto figure in this run");
        ArrayNode rs = root.putArray("results");
        for (Result r : results) {
            ObjectNode n = rs.addObject();
            n.put("shape", r.shape().name());
            n.put("n", r.shape().n());
            n.put("k", r.shape().k());
            n.put("perStep", r.shape().perStep());
            n.put("m", r.m());
            n.put("plan", r.plan());
            n.put("medianUs", GpuBench.round(r.medianUs(), 2));
            n.put("tflops", GpuBench.round(r.tflops(), 2));
            n.put("weightGBs", GpuBench.round(r.weightGBs(), 1));
            n.put("floorUs", GpuBench.round(floorUs(r, bandwidth, peak), 2));
            n.put("runs", r.runs());
            n.put("hostBound", r.hostBound());
        }
        ArrayNode steps = root.putArray("perStepMs");
        for (int m : rows) {
            ObjectNode n = steps.addObject();
            n.put("m", m);
            Map<String, Double> byPlan = new LinkedHashMap<>();
            for (String p : plans) {
                byPlan.put(p, GpuBench.round(stepMs(results, m, p), 3));
            }
            byPlan.forEach(n::put);
            n.put("floor", GpuBench.round(stepFloorMs(m, bandwidth, peak), 3));
        }
        Path parent = out.toAbsolutePath().getParent();
        if (parent != null) {
            Files.createDirectories(parent);
        }
        Files.writeString(out, json.writerWithDefaultPrettyPrinter().writeValueAsString(root) + "\n");
    }
}
