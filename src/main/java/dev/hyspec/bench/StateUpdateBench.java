package dev.hyspec.bench;

import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import dev.hyspec.backend.StateLayout;
import dev.hyspec.backend.Tensor;
import dev.hyspec.backend.cpu.CpuBackend;
import dev.hyspec.backend.cuda.CudaBackend;
import dev.hyspec.backend.cuda.CudaRuntime;
import dev.hyspec.backend.cuda.EventTimer;
import dev.hyspec.bench.StateWorkload.Op;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Locale;
import java.util.Optional;
import java.util.function.IntConsumer;

/**
 * The recurrent-state update of a verify row on the GPU, against its memory floor (DESIGN §10):
 * Mamba2 at the Nemotron-H-8B layer shape and Gated DeltaNet at the Qwen3.5 shape, T ∈ {1, 4, 6}
 * tokens per row, batch R ∈ {1 … 256}, for replay, intermediate-copy and plain decode, each
 * through the batched {@link dev.hyspec.backend.Backend} operations (whatever the CUDA backend
 * implements when it runs).
 *
 * <p>Floor: the bytes an operation must move ({@link StateWorkload#floorBytes}) at the device-copy
 * bandwidth measured in the same run (a 1 GiB copy, read + write counted). Each figure is the
 * median device time (CUDA events) per call: calls are queued behind a large copy so that they run
 * back to back and the host's launch cost is hidden (a figure where the queue drained anyway is
 * marked host-bound); each call takes the next of several independent sets of rows, at least
 * 256 MiB of state in all, so L2 cannot hold what the next call reads. After timing, every
 * operation is checked against the CPU reference on 2 rows ({@link StateUpdateCheck}); the exit
 * status is 1 when a check fails.
 *
 * <pre>
 * args: --out FILE.json [--quick]    (--quick: batches 1 and 64, fewer timed calls: a smoke test)
 *       [--arch mamba2,gdn] [--ops replay,intermediate-copy,decode] [--T 1,4,6]
 *       [--batches 32,64,256] [--layouts VK,KV] [--verify-kernels tile,pipe]
 * </pre>
 * {@code --verify-kernels} times the Mamba2 replay once per listed value of the system property
 * {@code hyspec.mamba2.verify-kernel} (the VK N = 128 kernels: tile, previous, tile4x4, generic), each
 * figure's operation labelled {@code replay/VALUE}, so kernels are compared within one run.
 * The filters narrow a run to the listed architectures, operations, tokens per row, batches and
 * state layouts (each defaults to everything); the checks run for the operations still selected.
 * Run on the device through {@code scripts/device/bench.sh}.
 */
public final class StateUpdateBench {
    static final int[] TOKENS = {1, 4, 6};
    static final int[] BATCHES = {1, 8, 32, 64, 128, 256};
    static final int[] QUICK_BATCHES = {1, 64};
    /** State across the sets a benchmark cycles through, at least (L2 is 50 MB on an H100). */
    private static final long MIN_STATE_BYTES = 256L << 20;
    private static final long COPY_BYTES = 1L << 30;

    /** An architecture, the layout its states are in, and the operations timed there. */
    record Case(StateWorkload workload, StateLayout layout, List<Op> ops) {}

    static final List<Case> CASES = List.of(
            new Case(StateWorkload.MAMBA2_8B, StateLayout.VK, List.of(Op.REPLAY, Op.INTERMEDIATE_COPY, Op.DECODE)),
            new Case(StateWorkload.MAMBA2_8B, StateLayout.KV, List.of(Op.REPLAY)),
            new Case(StateWorkload.GDN_QWEN35, StateLayout.KV, List.of(Op.REPLAY, Op.INTERMEDIATE_COPY, Op.DECODE)));

    record Result(String arch, String op, StateLayout layout, int tokens, int batch, double medianUs, double floorUs,
                  long floorBytes, int sets, int runs, boolean hostBound, double copyUs) {
        Result(String arch, String op, StateLayout layout, int tokens, int batch, double medianUs, double floorUs,
               long floorBytes, int sets, int runs, boolean hostBound) {
            this(arch, op, layout, tokens, batch, medianUs, floorUs, floorBytes, sets, runs, hostBound, Double.NaN);
        }

        /** The time of a device copy that moves the same bytes, over the floor (NaN where not measured). */
        double copyRatio() {
            return copyUs / floorUs;
        }

        double ratio() {
            return medianUs / floorUs;
        }

        double achievedGBs() {
            return floorBytes / (medianUs * 1e3);
        }
    }

    /** How many calls to time, and within what budget of device time per figure. */
    private record Effort(double budgetMs, int minRuns, int maxRuns, int copyRuns) {}

    private static final Effort FULL = new Effort(600, 20, 100, 15);
    private static final Effort QUICK = new Effort(150, 20, 24, 5);

    /** What a run measures: {@link #CASES} narrowed by the command line's filters, the T and batches. */
    record Selection(List<Case> cases, int[] tokens, int[] batches) {}

    /** Values of hyspec.mamba2.verify-kernel to time the Mamba2 replay under (null: as configured). */
    private static List<String> verifyKernels;
    /** The smallest batch whose replay figures get a same-bytes copy beside them. */
    private static final int SAME_BYTES_COPY_FROM = 8;

    private final CudaBackend gpu;
    private final EventTimer timer;
    private final Effort effort;
    private final RandomPool random;
    private Tensor copyA;   // [256, 2^20]: 1 GiB, the copy-bandwidth buffers, also the queue fillers
    private Tensor copyB;
    private double copyMs;

    private StateUpdateBench(CudaBackend gpu, Effort effort, long seed) {
        this.gpu = gpu;
        this.timer = gpu.timer();
        this.effort = effort;
        this.random = new RandomPool(seed, 1 << 22);
    }

    public static void main(String[] args) throws IOException {
        Path out = null;
        boolean quick = false;
        List<String> archs = null;
        List<String> ops = null;
        List<String> layouts = null;
        int[] tokens = TOKENS;
        int[] batches = null;
        for (int i = 0; i < args.length; i++) {
            if (i + 1 >= args.length && !args[i].equals("--quick")) {
                usage(args[i] + " needs a value");
            }
            switch (args[i]) {
                case "--out" -> out = Path.of(args[++i]);
                case "--quick" -> quick = true;
                case "--arch" -> archs = list(args[++i]);
                case "--ops" -> ops = list(args[++i]);
                case "--layouts" -> layouts = list(args[++i]);
                case "--T" -> tokens = ints(args[++i]);
                case "--batches" -> batches = ints(args[++i]);
                case "--verify-kernels" -> verifyKernels = list(args[++i]);
                default -> usage("unknown argument " + args[i]);
            }
        }
        if (out == null) {
            usage("--out is required");
        }
        Selection selection = select(archs, ops, layouts, tokens, batches != null ? batches
                : quick ? QUICK_BATCHES : BATCHES);
        Optional<String> missing = CudaRuntime.unavailableReason();
        if (missing.isPresent()) {
            System.err.println("StateUpdateBench needs a CUDA device: " + missing.get());
            System.exit(2);
        }
        long seed = System.nanoTime();
        System.out.println("[state-update] seed " + seed + (quick ? ", quick run" : ""));
        try (CudaBackend gpu = new CudaBackend(CudaBackend.Precision.FLOAT32)) {
            System.exit(new StateUpdateBench(gpu, quick ? QUICK : FULL, seed).run(out, quick, selection));
        }
    }

    private static void usage(String why) {
        System.err.println(why + "\nusage: StateUpdateBench --out FILE.json [--quick] [--arch mamba2,gdn]"
                + " [--ops replay,intermediate-copy,decode] [--T 1,4,6] [--batches 32,64,256] [--layouts VK,KV]");
        System.exit(2);
    }

    private static List<String> list(String csv) {
        return Arrays.stream(csv.split(",")).map(String::trim).filter(v -> !v.isEmpty()).toList();
    }

    private static int[] ints(String csv) {
        try {
            int[] v = list(csv).stream().mapToInt(Integer::parseInt).toArray();
            if (v.length == 0 || Arrays.stream(v).anyMatch(x -> x < 1)) {
                usage("not a list of positive integers: " + csv);
            }
            return v;
        } catch (NumberFormatException e) {
            usage("not a list of integers: " + csv);
            return null;
        }
    }

    /** {@link #CASES} narrowed to the listed architectures, operations and layouts (null: all). */
    static Selection select(List<String> archs, List<String> ops, List<String> layouts, int[] tokens, int[] batches) {
        if (archs != null) {
            for (String a : archs) {
                if (CASES.stream().noneMatch(c -> c.workload().arch().equals(a))) {
                    usage("unknown --arch " + a);
                }
            }
        }
        if (ops != null) {
            for (String o : ops) {
                if (Arrays.stream(Op.values()).noneMatch(op -> op.label.equals(o))) {
                    usage("unknown --ops " + o);
                }
            }
        }
        if (layouts != null) {
            for (String l : layouts) {
                if (Arrays.stream(StateLayout.values()).noneMatch(x -> x.name().equals(l))) {
                    usage("unknown --layouts " + l);
                }
            }
        }
        List<Case> cases = new ArrayList<>();
        for (Case c : CASES) {
            if ((archs != null && !archs.contains(c.workload().arch()))
                    || (layouts != null && !layouts.contains(c.layout().name()))) {
                continue;
            }
            List<Op> kept = c.ops().stream().filter(op -> ops == null || ops.contains(op.label)).toList();
            if (!kept.isEmpty()) {
                cases.add(new Case(c.workload(), c.layout(), kept));
            }
        }
        if (cases.isEmpty()) {
            usage("the filters leave nothing to measure");
        }
        return new Selection(cases, tokens, batches);
    }

    private int run(Path out, boolean quick, Selection selection) throws IOException {
        long t0 = System.nanoTime();
        double bandwidth = copyBandwidth();
        System.out.printf(Locale.ROOT, "[state-update] %s: device copy bandwidth %.0f GB/s (1 GiB copy, read + write)%n",
                gpu.deviceName(), bandwidth / 1e9);
        List<Result> results = new ArrayList<>();
        for (Case c : selection.cases()) {
            for (int batch : selection.batches()) {
                measure(c, batch, selection.tokens(), bandwidth, results);
            }
        }
        gpu.free(copyA);
        gpu.free(copyB);
        List<StateUpdateCheck.Result> checks = new ArrayList<>();
        try (CpuBackend cpu = new CpuBackend()) {
            for (Case c : selection.cases()) {
                for (Op op : c.ops()) {
                    StateUpdateCheck.Result check = StateUpdateCheck.run(c.workload(), op, c.layout(),
                            op == Op.DECODE ? 1 : 4, gpu, cpu, random);
                    checks.add(check);
                    System.out.printf(Locale.ROOT, "[state-update] check %s %s %s T=%d on %d rows: relative error %.2e %s%n",
                            check.arch(), check.op(), check.layout(), check.tokens(), StateUpdateCheck.ROWS,
                            check.relativeError(), check.passed() ? "ok" : "FAILED (tolerance "
                                    + StateUpdateCheck.TOLERANCE + ")");
                }
            }
        }
        double seconds = (System.nanoTime() - t0) / 1e9;
        StateUpdateTable.print(System.out, results, checks, bandwidth);
        writeJson(out, selection, results, checks, bandwidth, quick, seconds);
        System.out.printf(Locale.ROOT, "[state-update] wrote %s (%.0f s)%n", out, seconds);
        return checks.stream().allMatch(StateUpdateCheck.Result::passed) ? 0 : 1;
    }

    /** Device-to-device copy bandwidth, read + write counted: median of single 1 GiB copies. */
    private double copyBandwidth() {
        int cols = 1 << 20;
        int rows = (int) (COPY_BYTES / 4 / cols);
        copyA = gpu.zeros(rows, cols);
        copyB = gpu.zeros(rows, cols);
        copyMs = GpuBench.copyMillis(gpu, timer, copyA, copyB, effort.copyRuns());
        return 2.0 * COPY_BYTES / (copyMs / 1e3);
    }

    /** Times every operation of {@code c} at every T for {@code batch} rows, appending to {@code results}. */
    private void measure(Case c, int batch, int[] tokenCounts, double bandwidth, List<Result> results) {
        StateWorkload w = c.workload();
        long setBytes = 4 * w.stateElements() * batch;
        int sets = (int) Math.max(2, (MIN_STATE_BYTES + setBytes - 1) / setBytes);
        int maxTokens = Arrays.stream(tokenCounts).max().orElseThrow();
        Tensor template = gpu.upload(random.take(Math.toIntExact(w.stateElements()), 0.5f), w.stateShape(c.layout()));
        Tensor[] params = new Tensor[w.paramCount()];
        for (int i = 0; i < params.length; i++) {
            params[i] = gpu.upload(random.take(w.paramHeads(), 0.5f), w.paramHeads());
        }
        StateRows[] rows = new StateRows[sets];
        for (int s = 0; s < sets; s++) {
            rows[s] = new StateRows(w, gpu, c.layout(), batch, maxTokens, c.ops().contains(Op.INTERMEDIATE_COPY),
                    template);
        }
        for (int tokens : tokenCounts) {
            for (StateRows r : rows) {
                r.setTokens(tokens, random);
                w.primeHistory(r, params);
            }
            for (Op op : c.ops()) {
                if (op == Op.DECODE && tokens != 1) {
                    continue;   // a decode row carries one token
                }
                List<String> variants = op == Op.REPLAY && w.arch().equals("mamba2") && verifyKernels != null
                        ? verifyKernels : java.util.Collections.singletonList(null);
                for (String variant : variants) {
                    String label = op.label;
                    if (variant != null) {
                        System.setProperty("hyspec.mamba2.verify-kernel", variant);
                        label = op.label + "/" + variant;
                    }
                    try {
                        long wall = System.nanoTime();
                        GpuBench.Timed t = time(s -> w.run(op, rows[s], params), sets);
                        long bytes = w.floorBytes(op, tokens, batch);
                        // beside replay from batch 8 up: a plain device copy of the same bytes, timed the same way
                        double copyUs = op == Op.REPLAY && variant == null && batch >= SAME_BYTES_COPY_FROM
                                ? sameBytesCopyUs(bytes) : Double.NaN;
                        Result r = new Result(w.arch(), label, c.layout(), tokens, batch, t.medianUs(),
                                bytes / bandwidth * 1e6, bytes, sets, t.runs(), t.hostBound(), copyUs);
                        results.add(r);
                        System.out.printf(Locale.ROOT,
                                "[state-update] %-6s %-17s %s T=%d R=%3d: %10.1f us, floor %10.1f us, %5.2fx, %6.0f GB/s%s%s"
                                        + " (%d sets, %d calls, %.1f s)%n",
                                r.arch(), r.op(), r.layout(), tokens, batch, r.medianUs(), r.floorUs(), r.ratio(),
                                r.achievedGBs(), r.hostBound() ? " HOST-BOUND" : "",
                                Double.isNaN(copyUs) ? "" : String.format(Locale.ROOT,
                                        "; same-bytes copy %.1f us = %.2fx floor", copyUs, r.copyRatio()), sets, t.runs(),
                                (System.nanoTime() - wall) / 1e9);
                    } finally {
                        if (variant != null) {
                            System.clearProperty("hyspec.mamba2.verify-kernel");
                        }
                    }
                }
            }
        }
        for (StateRows r : rows) {
            r.free();
        }
        for (Tensor p : params) {
            gpu.free(p);
        }
        gpu.free(template);
    }

    /**
     * Median device µs of a device-to-device copy of {@code bytes / 2} bytes (it reads and writes
     * {@code bytes} in all), timed as the operations are: alternating between two buffer pairs, each
     * larger than the L2 cache from batch {@link #SAME_BYTES_COPY_FROM} up. It pays what any one
     * launch that moves these bytes pays (the start, the tail) and shows how much of an operation's
     * distance from its floor is that.
     */
    private double sameBytesCopyUs(long bytes) {
        int floats = Math.toIntExact(bytes / 8);
        Tensor[] src = {gpu.zeros(floats), gpu.zeros(floats)};
        Tensor[] dst = {gpu.zeros(floats), gpu.zeros(floats)};
        try {
            return time(s -> gpu.copy(src[s], dst[s]), 2).medianUs();
        } finally {
            for (Tensor t : new Tensor[] {src[0], src[1], dst[0], dst[1]}) {
                gpu.free(t);
            }
        }
    }

    /**
     * Median device µs per call of {@code call(set)}, the set advancing with every call. A sample is
     * a few calls queued behind copies that take longer than issuing them, timed by events; it is
     * host-bound when the device reached the start mark before the last call was issued.
     */
    private GpuBench.Timed time(IntConsumer call, int sets) {
        int[] next = {0};
        Runnable one = () -> {
            call.accept(next[0]);
            next[0] = (next[0] + 1) % sets;
        };
        one.run();
        one.run();
        gpu.synchronize();
        long t0 = System.nanoTime();
        for (int i = 0; i < 3; i++) {
            one.run();
        }
        long t1 = System.nanoTime();
        gpu.synchronize();
        double hostMs = (t1 - t0) / 3e6;
        double callMs = (System.nanoTime() - t0) / 3e6;
        int runs = (int) Math.max(effort.minRuns(), Math.min(effort.maxRuns(), effort.budgetMs() / callMs));
        int perSample = runs >= 80 ? 4 : runs >= 40 ? 2 : 1;
        int samples = (runs + perSample - 1) / perSample;
        int fillers = (int) Math.max(1, Math.min(8, Math.ceil(1.5 * perSample * hostMs / copyMs)));
        return GpuBench.sample(gpu, timer, one, copyA, copyB, samples, perSample, fillers);
    }

    private void writeJson(Path out, Selection selection, List<Result> results, List<StateUpdateCheck.Result> checks, double bandwidth,
                           boolean quick, double seconds) throws IOException {
        ObjectMapper json = new ObjectMapper();
        ObjectNode root = GpuBench.jsonRoot(json, gpu, quick, bandwidth, seconds);
        ObjectNode shapes = root.putObject("stateBytesPerRow");
        for (Case c : selection.cases()) {
            shapes.put(c.workload().arch(), 4 * c.workload().stateElements());
        }
        ArrayNode rs = root.putArray("results");
        for (Result r : results) {
            ObjectNode n = rs.addObject();
            n.put("arch", r.arch());
            n.put("op", r.op());
            n.put("layout", r.layout().name());
            n.put("T", r.tokens());
            n.put("batch", r.batch());
            n.put("medianUs", GpuBench.round(r.medianUs(), 2));
            n.put("floorUs", GpuBench.round(r.floorUs(), 2));
            n.put("ratio", GpuBench.round(r.ratio(), 3));
            n.put("achievedGBs", GpuBench.round(r.achievedGBs(), 1));
            n.put("floorBytes", r.floorBytes());
            n.put("sets", r.sets());
            n.put("runs", r.runs());
            n.put("hostBound", r.hostBound());
            if (!Double.isNaN(r.copyUs())) {
                n.put("sameBytesCopyUs", GpuBench.round(r.copyUs(), 2));
            }
            n.put("checkPassed", checks.stream().filter(k -> k.arch().equals(r.arch()) && k.op().equals(r.op())
                    && k.layout() == r.layout()).allMatch(StateUpdateCheck.Result::passed));
        }
        ArrayNode sp = root.putArray("speedups");
        for (StateUpdateTable.Speedup s : StateUpdateTable.speedups(results)) {
            ObjectNode n = sp.addObject();
            n.put("arch", s.arch());
            n.put("layout", s.layout().name());
            n.put("T", s.tokens());
            n.put("batch", s.batch());
            n.put("replayOverIntermediateCopy", GpuBench.round(s.factor(), 3));
        }
        ArrayNode cs = root.putArray("checks");
        for (StateUpdateCheck.Result k : checks) {
            ObjectNode n = cs.addObject();
            n.put("arch", k.arch());
            n.put("op", k.op());
            n.put("layout", k.layout().name());
            n.put("T", k.tokens());
            n.put("batch", StateUpdateCheck.ROWS);
            if (Double.isNaN(k.relativeError())) {
                n.putNull("relativeError");
            } else {
                n.put("relativeError", k.relativeError());
            }
            n.put("tolerance", StateUpdateCheck.TOLERANCE);
            n.put("passed", k.passed());
        }
        Path parent = out.toAbsolutePath().getParent();
        if (parent != null) {
            Files.createDirectories(parent);
        }
        Files.writeString(out, json.writerWithDefaultPrettyPrinter().writeValueAsString(root) + "\n");
    }
}
