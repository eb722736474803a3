package dev.hyspec.bench;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.SerializationFeature;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import dev.hyspec.backend.Backend;
import dev.hyspec.backend.Tensor;
import dev.hyspec.backend.cpu.CpuBackend;
import dev.hyspec.backend.cuda.CudaBackend;
import dev.hyspec.backend.cuda.HostProfile;
import dev.hyspec.backend.cuda.StepProfile;
import dev.hyspec.bench.DecodeRun.Measured;
import dev.hyspec.bench.DecodeRun.Mode;
import dev.hyspec.bench.DecodeRun.Workload;
import dev.hyspec.checkpoint.Checkpoint;
import dev.hyspec.engine.ModelRegistry;
import dev.hyspec.model.HybridModel;
import dev.hyspec.model.config.ModelConfig;
import dev.hyspec.model.config.ModelConfigParser;
import dev.hyspec.state.IntermediateCopyStrategy;
import dev.hyspec.state.ReplayStrategy;
import java.io.IOException;
import java.io.InputStream;
import java.io.UncheckedIOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.function.Consumer;
import java.util.function.Supplier;

/**
 * End-to-end decode on the GPU (hyspec issue 7): model shapes with random bf16 weights made on the
 * device ({@link HybridModel#generate}, no checkpoint), batches of greedy requests with repetitive
 * prompts, decoded without drafts and with n-gram drafts ({@code K = 3}) under each rollback
 * strategy. Beside every step time stands its floor, the bytes of weights one decode step reads
 * ({@link HybridModel#decodeWeightBytes}) at the device-to-device copy bandwidth measured in the
 * same run (DESIGN §10). Models are built, measured and closed one at a time: two of them do not
 * fit on one device with their state pools.
 *
 * <pre>
 * args: --out FILE.json [--quick] [--models nemotron-h-8b,qwen3.5-9b,kjv-hybrid] [--batches 1,8,32,64]
 *       [--drafter ngram|oracle|forced] [--accept-rate R] [--warmup-tokens N] [--profile]
 *       [--host-profile] [--no-split] [--cpu]
 * </pre>
 *
 * {@code kjv-hybrid} is the embedded trained model ({@link #TRAINED}), decoded on prompts of real
 * text with a repeated window: the n-gram drafter's real acceptance. {@code --accept-rate R} has the
 * forced drafter accept each draft with probability R given the ones before it were;
 * {@code --warmup-tokens} sets how many tokens each mode decodes at batch 2 before anything is
 * measured (256); {@code --no-split} runs each recorded step as one graph instead of pieces
 * ({@link CudaBackend#splitSteps}); {@code --cpu} runs on the CPU backend.
 *
 * {@code --profile} adds, per model, a few batch-1 no-spec steps profiled op by op
 * ({@link StepProfile}): a table of device time per kernel inside the step's graph, with the GEMVs'
 * achieved weight bandwidth. {@code --host-profile} adds, per model, a batch-1 no-spec run with the
 * host's part of every step timed ({@link HostProfile}): the engine's work, the recording, the
 * graph launch and the wait for the device, per step.
 *
 * {@code --drafter oracle} proposes each request's greedy continuation, taken from the no-spec run
 * of the same prompts ({@link DecodeRun}): random weights do not continue a repeated phrase, so
 * the n-gram drafter finds next to nothing to propose on them. The oracle's drafts are accepted
 * only as long as the verify step's greedy tokens equal the plain decode's bit for bit; on random
 * weights, whose top logits lie close together, a float32 summation-order difference between the
 * verify-shaped and the decode-shaped kernels parts them after a few dozen tokens, and from there
 * on the oracle proposes a continuation the request no longer has (its acceptance is measured and
 * reported). {@code --drafter forced} proposes the same drafts and has the engine accept every one
 * ({@link dev.hyspec.engine.EngineCore#forceDraftAcceptance}): the spec path's cost at full
 * acceptance, with outputs that are the drafts rather than the model's greedy tokens. The machine
 * object records which drafter ran.
 *
 * Writes {@code {"machine": {...}, "copyBandwidthGBs": x, "results": [{"model", "batch", "mode",
 * "k", "tokensPerSecond", "stepMs", "acceptanceRate", "weightBytes", "floorMs", "ratio"}, ...]}}
 * after every configuration (a run cut short keeps what it measured) and prints a table with each
 * step's breakdown.
 */
public final class DecodeBench {
    /** The model shapes, as config.json resources under {@code bench/}. */
    static final List<String> MODELS = List.of("nemotron-h-8b", "qwen3.5-9b");
    static final int NUM_DRAFTS = 3;
    static final List<Mode> MODES = List.of(Mode.NO_SPEC, Mode.spec(ReplayStrategy.ID, NUM_DRAFTS),
            Mode.spec(IntermediateCopyStrategy.ID, NUM_DRAFTS));
    private static final long SEED = 20_250_707L;
    /** The requests of a profile: a few decode steps after a short prefill. */
    private static final Workload PROFILE_WORKLOAD = new Workload(32, 8, 6);
    private static final ObjectMapper JSON = new ObjectMapper().enable(SerializationFeature.INDENT_OUTPUT);

    /** Where the spec modes' drafts come from. */
    enum DraftSource { NGRAM, ORACLE, FORCED }

    /** A model to measure: its name in the results and its config. */
    record ModelSpec(String name, ModelConfig config, Path checkpoint, int[][] texts) {
        ModelSpec(String name, ModelConfig config) {
            this(name, config, null, null);
        }

        /** The workload for this model: prompts of its real texts where it has them. */
        Workload prompts(Workload w) {
            return texts == null ? w : w.withTexts(texts);
        }

        /** The model on {@code backend}: the checkpoint's weights, or random ones of the config's shape. */
        HybridModel build(Backend backend) {
            return checkpoint == null ? HybridModel.generate(config, backend, SEED)
                    : HybridModel.load(Checkpoint.open(checkpoint), backend);
        }
    }

    /**
     * A trained model to measure the n-gram drafter's real acceptance on: the embedded default
     * ({@link ModelRegistry#EMBEDDED_MODEL}, looked up from the working directory).
     */
    static final String TRAINED = "kjv-hybrid";

    /**
     * Sizes of a run. {@code copyBytes}: each buffer of the bandwidth measurement, copied
     * {@code copyRepeats} times.
     */
    record Settings(Workload workload, Workload warmup, long copyBytes, int copyRepeats, double acceptRate) {
        static final Settings FULL = new Settings(new Workload(256, 16, 128), new Workload(32, 8, 256), 1L << 30, 20);
        static final Settings QUICK = new Settings(new Workload(64, 16, 64), new Workload(32, 8, 64), 1L << 29, 10);

        Settings(Workload workload, Workload warmup, long copyBytes, int copyRepeats) {
            this(workload, warmup, copyBytes, copyRepeats, 1.0);
        }
    }

    /** One row of the results. */
    record Result(String model, int batch, Mode mode, long weightBytes, double floorMs, Measured measured,
                  double logitsDownloadMs) {
        double ratio() {
            return measured.stepMs() / floorMs;
        }
    }

    /** Everything a run has measured so far. */
    record Report(Map<String, Object> machine, double copyBandwidthGBs, List<Result> results) {}

    private DecodeBench() {}

    public static void main(String[] args) throws IOException {
        Path out = null;
        Settings settings = Settings.FULL;
        List<String> models = MODELS;
        List<Integer> batches = List.of(1, 8, 32, 64);
        DraftSource drafter = DraftSource.NGRAM;
        boolean profile = false;
        boolean hostProfile = false;
        int warmupTokens = -1;
        boolean splitSteps = true;
        boolean cpu = false;
        double acceptRate = -1;
        for (int i = 0; i < args.length; i++) {
            switch (args[i]) {
                case "--out" -> out = Path.of(args[++i]);
                case "--quick" -> settings = Settings.QUICK;
                case "--models" -> models = List.of(args[++i].split(","));
                case "--batches" -> batches = Arrays.stream(args[++i].split(",")).map(Integer::valueOf).toList();
                case "--drafter" -> drafter = DraftSource.valueOf(args[++i].toUpperCase(Locale.ROOT));
                case "--profile" -> profile = true;
                case "--host-profile" -> hostProfile = true;
                case "--warmup-tokens" -> warmupTokens = Integer.parseInt(args[++i]);
                case "--no-split" -> splitSteps = false;
                case "--cpu" -> cpu = true;
                case "--accept-rate" -> acceptRate = Double.parseDouble(args[++i]);
                default -> usage("unknown argument " + args[i]);
            }
        }
        if (out == null) {
            usage("--out FILE.json is required");
        }
        if (warmupTokens > 0) {
            Workload w = settings.warmup();
            settings = new Settings(settings.workload(), new Workload(w.promptTokens(), w.phraseTokens(), warmupTokens),
                    settings.copyBytes(), settings.copyRepeats(), settings.acceptRate());
        }
        if (acceptRate >= 0) {
            if (drafter != DraftSource.FORCED || acceptRate > 1) {
                usage("--accept-rate (0 … 1) goes with --drafter forced");
            }
            settings = new Settings(settings.workload(), settings.warmup(), settings.copyBytes(), settings.copyRepeats(),
                    acceptRate);
        }
        List<ModelSpec> specs = new ArrayList<>();
        for (String m : models) {
            if (m.equals(TRAINED)) {
                Path dir = Path.of(ModelRegistry.EMBEDDED_MODEL);
                specs.add(new ModelSpec(m, ModelConfigParser.parse(Checkpoint.open(dir).config()), dir, texts(dir)));
                continue;
            }
            if (!MODELS.contains(m)) {
                usage("unknown model " + m + "; available: " + String.join(", ", MODELS) + ", " + TRAINED);
            }
            specs.add(new ModelSpec(m, config(m)));
        }
        Path target = out;
        Files.createDirectories(target.toAbsolutePath().getParent());
        boolean split = splitSteps;
        boolean onCpu = cpu;
        Report report = run(() -> {
            if (onCpu) {
                return new CpuBackend();
            }
            CudaBackend cuda = new CudaBackend(CudaBackend.Precision.BF16);
            cuda.splitSteps(split);
            return cuda;
        }, specs, batches, settings, drafter,
                profile, hostProfile, r -> {
            try {
                Files.writeString(target, toJson(r));
            } catch (IOException e) {
                throw new UncheckedIOException(e);
            }
        });
        printTable(report);
        System.out.println("wrote " + target);
    }

    private static void usage(String why) {
        System.err.println(why + "\nusage: DecodeBench --out FILE.json [--quick] [--models " + String.join(",", MODELS)
                + "," + TRAINED + "] [--batches 1,8,32,64] [--drafter ngram|oracle|forced] [--accept-rate R]"
                + " [--warmup-tokens N] [--profile] [--host-profile] [--no-split] [--cpu]");
        System.exit(2);
    }

    /**
     * Real text for a trained model's prompts: each prompt of its {@code reference.json} followed by
     * its greedy continuation (transformers' tokens, {@code greedy[i].cached}).
     */
    static int[][] texts(Path dir) {
        try {
            JsonNode ref = JSON.readTree(dir.resolve("reference.json").toFile());
            int n = ref.get("prompts").size();
            int[][] texts = new int[n][];
            for (int i = 0; i < n; i++) {
                List<Integer> t = new ArrayList<>();
                ref.get("prompts").get(i).forEach(v -> t.add(v.asInt()));
                ref.get("greedy").get(i).get("cached").forEach(v -> t.add(v.asInt()));
                texts[i] = t.stream().mapToInt(Integer::intValue).toArray();
            }
            return texts;
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
    }

    /** The config of a model shape named in {@link #MODELS}. */
    public static ModelConfig config(String name) {
        try (InputStream in = DecodeBench.class.getResourceAsStream("/bench/" + name + ".json")) {
            if (in == null) {
                throw new IllegalArgumentException("no config resource bench/" + name + ".json");
            }
            return ModelConfigParser.parse(JSON.readTree(in));
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
    }

    /**
     * Measures every model × batch × mode, each model on a fresh backend from {@code backends} that
     * is closed before the next model is built. {@code progress} gets the report after every result.
     */
    static Report run(Supplier<Backend> backends, List<ModelSpec> models, List<Integer> batches, Settings s,
                      DraftSource drafter, boolean profile, boolean hostProfile, Consumer<Report> progress) {
        Map<String, Object> machine = new LinkedHashMap<>();
        machine.put("drafter", drafter.name().toLowerCase(Locale.ROOT));
        double forcedRate = drafter == DraftSource.FORCED ? s.acceptRate() : -1;
        if (forcedRate >= 0) {
            machine.put("forcedAcceptRate", forcedRate);
        }
        machine.put("java", System.getProperty("java.version"));
        machine.put("cpus", Runtime.getRuntime().availableProcessors());
        machine.put("workload", Map.of("promptTokens", s.workload().promptTokens(), "phraseTokens",
                s.workload().phraseTokens(), "maxTokens", s.workload().maxTokens()));
        List<Result> results = new ArrayList<>();
        double bandwidth = Double.NaN;   // bytes/s
        for (ModelSpec spec : models) {
            try (Backend backend = backends.get()) {
                machine.put("backend", backend.name());
                if (backend instanceof CudaBackend cuda) {
                    machine.put("device", cuda.deviceName());
                    machine.put("activations", cuda.precision().name().toLowerCase(Locale.ROOT));
                    machine.put("splitSteps", cuda.splitsSteps());
                }
                if (Double.isNaN(bandwidth)) {
                    bandwidth = copyBandwidth(backend, s.copyBytes(), s.copyRepeats());
                    System.out.printf(Locale.ROOT, "device-to-device copy bandwidth: %.1f GB/s (read + write)%n",
                            bandwidth / 1e9);
                }
                long t0 = System.nanoTime();
                HybridModel model = spec.build(backend);
                Tensor probe = backend.zeros(1);
                backend.download(probe);   // waits for the generation kernels
                backend.free(probe);
                long weightBytes = model.decodeWeightBytes();
                double floorMs = weightBytes / bandwidth * 1e3;
                System.out.printf(Locale.ROOT, "%s: generated in %.1f s; %.2f GB of weights per decode step, floor %.3f ms%s%n",
                        spec.name(), (System.nanoTime() - t0) / 1e9, weightBytes / 1e9, floorMs,
                        backend instanceof CudaBackend c ? String.format(Locale.ROOT, "; %.2f GB on the device",
                                c.liveBytes() / 1e9) : "");
                int[][] greedy = null;
                for (Mode mode : MODES) {   // warm-up: the JIT and the first graph captures
                    int[][] out = DecodeRun.run(model, 2, mode, spec.prompts(s.warmup()), SEED, oracle(drafter, greedy),
                            forcedRate, null).outputs();
                    greedy = greedy == null ? out : greedy;
                }
                System.out.println(HEADER);
                for (int batch : batches) {
                    greedy = null;
                    for (Mode mode : MODES) {   // no-spec first: its outputs are the oracle's drafts
                        try {
                            Measured m = DecodeRun.run(model, batch, mode, spec.prompts(s.workload()), SEED + batch,
                                    oracle(drafter, greedy), forcedRate, null);
                            greedy = greedy == null ? m.outputs() : greedy;
                            double download = DecodeRun.logitsDownloadMs(backend, batch * (mode.numDrafts() + 1),
                                    spec.config().vocabSize());
                            Result r = new Result(spec.name(), batch, mode, weightBytes, floorMs, m, download);
                            results.add(r);
                            System.out.println(row(r));
                            progress.accept(new Report(machine, bandwidth / 1e9, List.copyOf(results)));
                        } catch (RuntimeException e) {
                            System.out.printf(Locale.ROOT, "%s batch %d %s: failed: %s%n", spec.name(), batch,
                                    mode.name(), e);
                        }
                    }
                }
                if (profile && backend instanceof CudaBackend cuda) {
                    StepProfile p = cuda.startProfile();
                    try {
                        DecodeRun.run(model, 1, Mode.NO_SPEC, PROFILE_WORKLOAD, SEED, null);
                    } finally {
                        cuda.stopProfile(p);
                    }
                    System.out.printf(Locale.ROOT, "%s batch 1 no-spec, floor %.3f ms%n%s", spec.name(), floorMs,
                            p.table());
                }
                if (hostProfile && backend instanceof CudaBackend cuda) {
                    HostProfile p = cuda.startHostProfile();
                    Measured m;
                    try {
                        m = DecodeRun.run(model, 1, Mode.NO_SPEC, spec.prompts(s.workload()), SEED + 1, null, -1, p);
                    } finally {
                        cuda.stopHostProfile();
                    }
                    System.out.printf(Locale.ROOT, "%s batch 1 no-spec with the host profile on: step %.3f ms, floor "
                            + "%.3f ms, ratio %.2f%n%s", spec.name(), m.stepMs(), floorMs, m.stepMs() / floorMs, p.table());
                }
            }
        }
        return new Report(machine, bandwidth / 1e9, results);
    }

    private static int[][] oracle(DraftSource drafter, int[][] greedy) {
        return drafter == DraftSource.NGRAM ? null : greedy;
    }

    /**
     * Device-to-device copy bandwidth (bytes read plus bytes written per second): {@code repeats}
     * copies of {@code bytes}, timed from a drained stream to a drained stream.
     */
    static double copyBandwidth(Backend backend, long bytes, int repeats) {
        int floats = Math.toIntExact(bytes / 4);
        Tensor src = backend.zeros(floats);
        Tensor dst = backend.zeros(floats);
        Tensor probe = backend.zeros(1);
        try {
            backend.copy(src, dst);
            backend.download(probe);   // a download waits for all issued work
            long t0 = System.nanoTime();
            for (int i = 0; i < repeats; i++) {
                backend.copy(src, dst);
            }
            backend.download(probe);
            double seconds = (System.nanoTime() - t0) / 1e9;
            return 2.0 * 4 * floats * repeats / seconds;
        } finally {
            for (Tensor t : new Tensor[] {src, dst, probe}) {
                backend.free(t);
            }
        }
    }

    static String toJson(Report report) {
        ObjectNode root = JSON.createObjectNode();
        root.set("machine", JSON.valueToTree(report.machine()));
        root.put("copyBandwidthGBs", report.copyBandwidthGBs());
        ArrayNode results = root.putArray("results");
        for (Result r : report.results()) {
            ObjectNode o = results.addObject();
            o.put("model", r.model());
            o.put("batch", r.batch());
            o.put("mode", r.mode().name());
            o.put("k", r.mode().numDrafts());
            o.put("tokensPerSecond", r.measured().tokensPerSecond());
            o.put("stepMs", r.measured().stepMs());
            o.put("acceptanceRate", r.measured().acceptanceRate());
            o.put("weightBytes", r.weightBytes());
            o.put("floorMs", r.floorMs());
            o.put("ratio", r.ratio());
        }
        try {
            return JSON.writeValueAsString(root) + "\n";
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
    }

    static JsonNode parse(String json) throws IOException {
        return JSON.readTree(json);
    }

    private static final String HEADER = String.format(Locale.ROOT,
            "%-14s %5s %-17s %2s %9s %8s %8s %6s %6s %6s | %8s %7s %7s %8s %6s  %s", "model", "batch", "mode",
            "k", "tok/s", "step ms", "floor ms", "ratio", "accept", "drafts", "fwd ms", "commit", "host ms", "logits",
            "steps", "graphs c/r/e/a");

    private static String row(Result r) {
        Measured m = r.measured();
        long[] g = m.graphs();
        return String.format(Locale.ROOT,
                "%-14s %5d %-17s %2d %9.1f %8.3f %8.3f %6.2f %6.3f %6.2f | %8.3f %7.3f %7.3f %8.3f %6d  %d/%d/%d/%d",
                r.model(), r.batch(), r.mode().name(), r.mode().numDrafts(), m.tokensPerSecond(), m.stepMs(),
                r.floorMs(), r.ratio(), m.acceptanceRate(), m.draftsPerRow(), m.forwardMs(), m.commitMs(), m.hostMs(),
                r.logitsDownloadMs(), m.decodeSteps(), g[0], g[1], g[2], g[3]);
    }

    private static void printTable(Report report) {
        System.out.printf(Locale.ROOT, "%ncopy bandwidth %.1f GB/s; drafts = drafts proposed per generate row; "
                + "per decode step: fwd = model forward with the logits download, commit = rollback commits, host = "
                + "scheduling, drafting, verification; logits = download of one step's logits alone%n", report.copyBandwidthGBs());
        System.out.println(HEADER);
        for (Result r : report.results()) {
            System.out.println(row(r));
        }
    }
}
