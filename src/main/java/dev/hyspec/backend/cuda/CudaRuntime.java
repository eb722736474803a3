package dev.hyspec.backend.cuda;

import static jcuda.driver.JCudaDriver.cuCtxSetCurrent;
import static jcuda.driver.JCudaDriver.cuDeviceGet;
import static jcuda.driver.JCudaDriver.cuDeviceGetAttribute;
import static jcuda.driver.JCudaDriver.cuDeviceGetCount;
import static jcuda.driver.JCudaDriver.cuDeviceGetName;
import static jcuda.driver.JCudaDriver.cuDevicePrimaryCtxRelease;
import static jcuda.driver.JCudaDriver.cuDevicePrimaryCtxRetain;
import static jcuda.driver.JCudaDriver.cuFuncSetAttribute;
import static jcuda.driver.JCudaDriver.cuInit;
import static jcuda.driver.JCudaDriver.cuLaunchKernel;
import static jcuda.driver.JCudaDriver.cuMemAllocHost;
import static jcuda.driver.JCudaDriver.cuMemFreeHost;
import static jcuda.driver.JCudaDriver.cuMemcpyDtoH;
import static jcuda.driver.JCudaDriver.cuMemcpyHtoD;
import static jcuda.driver.JCudaDriver.cuMemcpyDtoDAsync;
import static jcuda.driver.JCudaDriver.cuMemcpyHtoDAsync;
import static jcuda.driver.JCudaDriver.cuMemsetD32Async;
import static jcuda.driver.JCudaDriver.cuModuleGetFunction;
import static jcuda.driver.JCudaDriver.cuModuleLoadData;
import static jcuda.driver.JCudaDriver.cuModuleUnload;
import static jcuda.driver.JCudaDriver.cuStreamCreate;
import static jcuda.driver.JCudaDriver.cuStreamDestroy;
import static jcuda.driver.JCudaDriver.cuStreamSynchronize;

import java.io.IOException;
import java.io.InputStream;
import java.io.UncheckedIOException;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import jcuda.CudaException;
import jcuda.Pointer;
import jcuda.driver.CUcontext;
import jcuda.driver.CUdevice;
import jcuda.driver.CUdevice_attribute;
import jcuda.driver.CUdeviceptr;
import jcuda.driver.CUfunction;
import jcuda.driver.CUfunction_attribute;
import jcuda.driver.CUmodule;
import jcuda.driver.CUstream;
import jcuda.driver.CUstream_flags;
import jcuda.driver.JCudaDriver;

/**
 * One CUDA device as hyspec uses it: the primary context, one stream that all work is issued on,
 * the PTX modules built from {@code src/native-kernels} (resources under {@value #PTX_DIR}), the
 * accounted device memory, and a pinned staging area for the small host arrays that kernels take
 * (token ids, positions, block tables). The thread that drives the engine owns it; any thread that
 * calls in gets the context made current once. Between {@link #beginGraph()} and {@link #endGraph()}
 * work is recorded and run as a captured graph where the step recurs ({@link StepGraphs}).
 */
public final class CudaRuntime implements AutoCloseable {
    static final String PTX_DIR = "native-kernels";
    /** Bytes of pinned host memory (and its device twin) for host arrays staged per launch. */
    private static final int STAGING_BYTES = 4 << 20;
    /** {@code -Dhyspec.cuda.split-steps=false}: every recorded step is one piece (one graph). */
    private static final boolean SPLIT_STEPS = Boolean.parseBoolean(System.getProperty("hyspec.cuda.split-steps", "true"));

    private final CUdevice device = new CUdevice();
    private final CUcontext context = new CUcontext();
    private final CUstream stream = new CUstream();
    private final List<CUmodule> modules = new ArrayList<>();
    private final Map<String, CUfunction> functions = new HashMap<>();
    private final Map<String, Integer> functionIds = new HashMap<>();
    private final Map<String, Integer> sharedAllowed = new HashMap<>();
    private final ThreadLocal<Boolean> current = ThreadLocal.withInitial(() -> false);
    private final DeviceMemory memory = new DeviceMemory();
    private final String deviceName;
    private final int smCount;
    private final Pointer stagingHost = new Pointer();
    private final ByteBuffer staging;
    private final CUdeviceptr stagingDevice;
    private int stagingAt;
    private int pieceStaging;   // where the staged arrays of the piece being recorded begin
    private int pendingFrom = -1;   // outside a recording: where the staged arrays not yet copied begin
    private boolean splitSteps = SPLIT_STEPS;
    private final StepGraphs graphs;
    private String nextLabel;   // labelNext: the next launch's profile label and weight bytes
    private long nextBytes;
    private HostProfile hostProfile;   // null unless a host profile is on
    private boolean closed;

    /** Opens device {@code ordinal}; throws {@link IllegalStateException} saying why when it cannot. */
    public CudaRuntime(int ordinal) {
        Optional<String> missing = unavailableReason();
        if (missing.isPresent()) {
            throw new IllegalStateException(missing.get());
        }
        cuDeviceGet(device, ordinal);
        cuDevicePrimaryCtxRetain(context, device);
        cuCtxSetCurrent(context);
        current.set(true);
        byte[] name = new byte[256];
        cuDeviceGetName(name, name.length, device);
        deviceName = new String(name, StandardCharsets.UTF_8).trim().replace("\0", "");
        int[] v = new int[1];
        cuDeviceGetAttribute(v, CUdevice_attribute.CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, device);
        smCount = v[0];
        cuStreamCreate(stream, CUstream_flags.CU_STREAM_NON_BLOCKING);
        graphs = new StepGraphs(stream);
        memory.beforeTrim(this::sync);
        for (Map.Entry<String, byte[]> ptx : loadPtx().entrySet()) {
            CUmodule m = new CUmodule();
            cuModuleLoadData(m, ptx.getValue());
            modules.add(m);
        }
        cuMemAllocHost(stagingHost, STAGING_BYTES);
        staging = stagingHost.getByteBuffer(0, STAGING_BYTES).order(ByteOrder.nativeOrder());
        stagingDevice = memory.alloc(STAGING_BYTES);
    }

    /**
     * Why no CUDA device can be used here (no driver, no device, or the kernels were not built),
     * or empty when one can.
     */
    public static synchronized Optional<String> unavailableReason() {
        if (probed == null) {
            probed = probe();   // once: a failed native load cannot be retried in the same JVM
        }
        return probed;
    }

    private static Optional<String> probed;

    private static Optional<String> probe() {
        if (CudaRuntime.class.getClassLoader().getResource(PTX_DIR + "/index.txt") == null) {
            return Optional.of("the CUDA kernels were not built (no nvcc at build time): no " + PTX_DIR
                    + "/index.txt resource");
        }
        try {
            JCudaDriver.setExceptionsEnabled(true);
            cuInit(0);
            int[] count = new int[1];
            cuDeviceGetCount(count);
            if (count[0] == 0) {
                return Optional.of("the CUDA driver reports no device");
            }
            return Optional.empty();
        } catch (CudaException e) {
            return Optional.of("CUDA driver: " + e.getMessage());
        } catch (LinkageError e) {
            String msg = String.valueOf(e.getMessage());
            return Optional.of(msg.contains("libcuda") ? "no CUDA driver: libcuda.so.1 cannot be loaded"
                    : "the JCuda driver library cannot be loaded: " + msg.lines().findFirst().orElse(msg));
        }
    }

    private static Map<String, byte[]> loadPtx() {
        Map<String, byte[]> out = new LinkedHashMap<>();
        ClassLoader cl = CudaRuntime.class.getClassLoader();
        String index = new String(resource(cl, PTX_DIR + "/index.txt"), StandardCharsets.UTF_8);
        for (String name : index.split("\\s+")) {
            if (!name.isBlank()) {
                byte[] ptx = resource(cl, PTX_DIR + "/" + name + ".ptx");
                out.put(name, Arrays.copyOf(ptx, ptx.length + 1));   // cuModuleLoadData wants a NUL-terminated image
            }
        }
        return out;
    }

    private static byte[] resource(ClassLoader cl, String path) {
        try (InputStream in = cl.getResourceAsStream(path)) {
            if (in == null) {
                throw new IllegalStateException("missing resource " + path);
            }
            return in.readAllBytes();
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
    }

    /** Makes the context current on the calling thread (once per thread). */
    void enter() {
        if (closed) {
            throw new IllegalStateException("the CUDA backend was closed");
        }
        if (!current.get()) {
            cuCtxSetCurrent(context);
            current.set(true);
        }
    }

    public String deviceName() {
        return deviceName;
    }

    public int smCount() {
        return smCount;
    }

    CUstream stream() {
        return stream;
    }

    DeviceMemory memory() {
        return memory;
    }

    /** A kernel by its {@code extern "C"} name, from whichever module defines it. */
    CUfunction function(String name) {
        CUfunction f = functions.get(name);
        if (f != null) {
            return f;
        }
        for (CUmodule m : modules) {
            CUfunction candidate = new CUfunction();
            try {
                cuModuleGetFunction(candidate, m, name);
                functions.put(name, candidate);
                functionIds.put(name, functionIds.size());
                return candidate;
            } catch (CudaException e) {
                // not in this module
            }
        }
        throw new IllegalStateException("no CUDA kernel named " + name + " in the built PTX");
    }

    /** Allows a kernel more than 48 KiB of dynamic shared memory (a driver call only when the limit grows). */
    void allowSharedMemory(String kernel, int bytes) {
        if (sharedAllowed.getOrDefault(kernel, 0) >= bytes) {
            return;
        }
        sharedAllowed.put(kernel, bytes);
        cuFuncSetAttribute(function(kernel), CUfunction_attribute.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                bytes);
    }

    /**
     * Launches {@code kernel} on the stream. Arguments: {@link CudaTensor} and {@link CUdeviceptr}
     * become device pointers, {@link Integer}, {@link Float}, {@link Long} their C types.
     */
    void launch(String kernel, int gridX, int gridY, int gridZ, int blockX, int sharedBytes, Object... args) {
        if (hostProfile == null) {
            launchOrQueue(kernel, gridX, gridY, gridZ, blockX, sharedBytes, args);
            return;
        }
        long t0 = System.nanoTime();
        launchOrQueue(kernel, gridX, gridY, gridZ, blockX, sharedBytes, args);
        hostProfile.queued(System.nanoTime() - t0);
    }

    private void launchOrQueue(String kernel, int gridX, int gridY, int gridZ, int blockX, int sharedBytes,
                               Object... args) {
        String label = nextLabel == null ? kernel : kernel + " " + nextLabel;
        long labelBytes = nextBytes;
        nextLabel = null;
        nextBytes = 0;
        // Tensors become their addresses now (a tensor freed later in a recorded step still ran here);
        // the parameter pointers are built only when the launch is issued: a replayed step never is.
        Object[] values = args.clone();
        for (int i = 0; i < values.length; i++) {
            Object a = values[i];
            if (a instanceof CudaTensor t) {
                values[i] = t.ptr();
            } else if (!(a instanceof CUdeviceptr || a instanceof Integer || a instanceof Float || a instanceof Long)) {
                throw new IllegalArgumentException("argument " + i + " to " + kernel + ": " + a);
            }
        }
        if (gridX <= 0 || gridY <= 0 || gridZ <= 0) {
            return;   // nothing to do
        }
        Kernel k = kernel(kernel);
        if (graphs.recording()) {
            graphs.addLaunch(label, labelBytes,
                    s -> cuLaunchKernel(k.function(), gridX, gridY, gridZ, blockX, 1, 1, sharedBytes, s,
                            parameters(values), null),
                    k.id(), gridX, gridY, gridZ, blockX, sharedBytes, values);
            return;
        }
        flushStaged();
        cuLaunchKernel(k.function(), gridX, gridY, gridZ, blockX, 1, 1, sharedBytes, stream, parameters(values), null);
    }

    /** A kernel function with its index in the order kernels were first used (for signatures). */
    private record Kernel(CUfunction function, int id) {}

    private final Map<String, Kernel> kernels = new HashMap<>();

    private Kernel kernel(String name) {
        Kernel k = kernels.get(name);
        if (k == null) {
            CUfunction f = function(name);
            k = new Kernel(f, functionIds.get(name));
            kernels.put(name, k);
        }
        return k;
    }

    /** The kernel parameter array of launch arguments ({@link CUdeviceptr}, {@link Integer}, {@link Float}, {@link Long}). */
    private static Pointer parameters(Object[] values) {
        Pointer[] params = new Pointer[values.length];
        for (int i = 0; i < values.length; i++) {
            Object a = values[i];
            if (a instanceof CUdeviceptr p) {
                params[i] = Pointer.to(p);
            } else if (a instanceof Integer v) {
                params[i] = Pointer.to(new int[] {v});
            } else if (a instanceof Float v) {
                params[i] = Pointer.to(new float[] {v});
            } else {
                params[i] = Pointer.to(new long[] {(Long) a});
            }
        }
        return Pointer.to(params);
    }

    /**
     * Names the next launch in a step profile ({@link StepProfile}): {@code label} follows the kernel's
     * name, {@code bytes} are the weight bytes it streams.
     */
    void labelNext(String label, long bytes) {
        nextLabel = label;
        nextBytes = bytes;
    }

    /** Profiles every recorded step until {@link #stopProfile()} (see {@link StepProfile}). */
    void startProfile(StepProfile profile) {
        graphs.abandon();
        graphs.profile(profile);
    }

    void stopProfile() {
        graphs.abandon();
        graphs.profile(null);
    }

    /** Whether a step profile is on (launches worth a label then call {@link #labelNext}). */
    boolean profiling() {
        return graphs.profiling();
    }

    /** {@code bytes} from {@code src} to {@code dst}, in stream order. */
    void copy(CUdeviceptr dst, CUdeviceptr src, long bytes) {
        if (bytes <= 0) {
            return;
        }
        if (graphs.recording()) {
            graphs.add("memcpy device-to-device", 0, s -> cuMemcpyDtoDAsync(dst, src, bytes, s), 2,
                    StepGraphs.address(dst),
                    StepGraphs.address(src), bytes);
            return;
        }
        flushStaged();
        cuMemcpyDtoDAsync(dst, src, bytes, stream);
    }

    /** Zeroes {@code words} 32-bit words at {@code dst}, in stream order. */
    void zero(CUdeviceptr dst, long words) {
        if (words <= 0) {
            return;
        }
        if (graphs.recording()) {
            graphs.add("memset (zeros)", 0, s -> cuMemsetD32Async(dst, 0, words, s), 3, StepGraphs.address(dst),
                    words);
            return;
        }
        flushStaged();
        cuMemsetD32Async(dst, 0, words, stream);
    }

    /**
     * Starts recording a step whose work may run as a captured graph (see {@link StepGraphs}): until
     * {@link #endGraph()}, work is queued, and the staged host arrays start at the same place each step.
     */
    void beginGraph() {
        if (hostProfile != null) {
            hostProfile.recordBegan();
        }
        graphs.abandon();
        flushStaged();
        cuStreamSynchronize(stream);   // nothing still reads the staging area
        stagingAt = 0;
        pieceStaging = 0;
        graphs.begin();
    }

    /**
     * A place where the step being recorded may be cut ({@link StepGraphs#cut}): the work recorded so
     * far is launched, and the device runs it while the host records the rest. The next piece stages
     * its arrays after this one's, so the copy already queued is never overwritten.
     */
    void graphBreak() {
        if (!splitSteps || !graphs.recording() || graphs.profiling()) {
            return;
        }
        graphs.cut();
        pieceStaging = stagingAt;
    }

    /** Whether recorded steps are cut at {@link #graphBreak()} (the default: {@code hyspec.cuda.split-steps}). */
    void splitSteps(boolean split) {
        splitSteps = split;
    }

    boolean splitsSteps() {
        return splitSteps;
    }

    /**
     * Starts the staging area over without the synchronisation a wrap costs (for timing loops that
     * must not stall their queue). Only while nothing queued still reads it: after a synchronize.
     */
    void restartStaging() {
        flushStaged();
        stagingAt = 0;
    }

    /** Ends the recorded step: replays its graph, captures one, or issues the work. */
    void endGraph() {
        if (hostProfile == null) {
            graphs.end();
            return;
        }
        hostProfile.recordEnded(graphs.queuedOps());
        graphs.end();
        hostProfile.launched();
    }

    /** Graphs captured, steps replayed from a graph, recorded steps issued eagerly, recordings given up. */
    long[] graphCounts() {
        return new long[] {graphs.captured(), graphs.replayed(), graphs.eager(), graphs.abandoned()};
    }

    /**
     * Copies {@code data} to device memory that stays valid for the work issued after this call (the
     * staging area is reused once it fills, after the stream has drained). Returns its address.
     */
    CUdeviceptr stage(int[] data) {
        if (hostProfile == null) {
            return stageInts(data);
        }
        long t0 = System.nanoTime();
        CUdeviceptr at = stageInts(data);
        hostProfile.staged(System.nanoTime() - t0);
        return at;
    }

    private CUdeviceptr stageInts(int[] data) {
        int bytes = Math.max(4, data.length * 4);
        if (bytes > STAGING_BYTES) {
            throw new IllegalArgumentException("host array of " + data.length + " ints is too large to stage");
        }
        int at = (stagingAt + 255) & ~255;
        if (at + bytes > STAGING_BYTES) {
            graphs.abandon();              // a step that does not fit is not recorded
            flushStaged();
            cuStreamSynchronize(stream);   // every earlier staged copy and its readers are done
            at = 0;
        }
        staging.position(at);
        staging.asIntBuffer().put(data);
        CUdeviceptr dst = stagingDevice.withByteOffset(at);
        stagingAt = at + bytes;
        if (graphs.recording()) {
            // a recorded step stages from offset 0 (beginGraph), each piece after the one before (graphBreak)
            int from = pieceStaging;
            int length = stagingAt - from;
            CUdeviceptr deviceFrom = stagingDevice.withByteOffset(from);
            Pointer hostFrom = stagingHost.withByteOffset(from);
            graphs.staged(from, length, s -> cuMemcpyHtoDAsync(deviceFrom, hostFrom, length, s));
        } else if (pendingFrom < 0) {
            pendingFrom = at;   // copied with the arrays staged after it, before the next work is issued
        }
        return dst;
    }

    /** As {@link #stage(int[])} for floats. */
    CUdeviceptr stage(float[] data) {
        int[] bits = new int[data.length];
        for (int i = 0; i < data.length; i++) {
            bits[i] = Float.floatToRawIntBits(data[i]);
        }
        return stage(bits);
    }

    /** As {@link #stage(int[])} for 64-bit values (two native-order words each). */
    CUdeviceptr stage(long[] data) {
        int[] words = new int[2 * data.length];
        boolean little = ByteOrder.nativeOrder() == ByteOrder.LITTLE_ENDIAN;
        for (int i = 0; i < data.length; i++) {
            int lo = (int) data[i];
            int hi = (int) (data[i] >>> 32);
            words[2 * i] = little ? lo : hi;
            words[2 * i + 1] = little ? hi : lo;
        }
        return stage(words);
    }

    /**
     * The device addresses of {@code tensors}, staged as a {@code float*[]} / {@code const float*[]}
     * table a kernel indexes by row: how one launch reaches many slots' states.
     */
    CUdeviceptr stagePointers(CudaTensor... tensors) {
        long[] addresses = new long[tensors.length];
        for (int i = 0; i < tensors.length; i++) {
            addresses[i] = StepGraphs.address(tensors[i].ptr());
        }
        return stage(addresses);
    }

    /** Waits for all issued work (a step being recorded is issued first, without a graph). */
    void sync() {
        graphs.abandon();
        flushStaged();
        cuStreamSynchronize(stream);
    }

    /**
     * Issues the copy of the host arrays staged since the last work was issued (outside a recorded
     * step): one copy for all of them, so an operation that stages several tables (addresses, counts)
     * costs the stream one host-to-device copy, not one per table. Called before anything else is
     * issued on the stream.
     */
    private void flushStaged() {
        if (pendingFrom < 0) {
            return;
        }
        int from = pendingFrom;
        pendingFrom = -1;
        cuMemcpyHtoDAsync(stagingDevice.withByteOffset(from), stagingHost.withByteOffset(from), stagingAt - from, stream);
    }

    /** Copies host bytes to device memory, after all issued work. */
    void upload(Pointer host, CUdeviceptr dst, long bytes) {
        sync();
        cuMemcpyHtoD(dst, host, bytes);
    }

    /** Copies device memory to the host once all issued work is done. */
    void download(CUdeviceptr src, Pointer host, long bytes) {
        sync();
        cuMemcpyDtoH(host, src, bytes);
        if (hostProfile != null) {
            hostProfile.synced();
        }
    }

    /** Times the host's work in every step until called with null (see {@link HostProfile}). */
    void hostProfile(HostProfile profile) {
        hostProfile = profile;
        memory.hostProfile(profile);
    }

    /** Bytes of device memory held by live tensors. */
    public long liveBytes() {
        return memory.liveBytes();
    }

    /** Live device blocks (tensors plus the staging area). */
    public long liveBlocks() {
        return memory.liveBlocks();
    }

    // ---- events, for timing work on the device (EventTimer) ----

    private final List<jcuda.driver.CUevent> events = new ArrayList<>();

    /** A new timing event on this context; {@link #close()} destroys it. */
    jcuda.driver.CUevent newEvent() {
        enter();
        jcuda.driver.CUevent e = new jcuda.driver.CUevent();
        JCudaDriver.cuEventCreate(e, 0);   // flags 0: the event records a timestamp
        events.add(e);
        return e;
    }

    /** Records {@code e} on the stream after all work issued so far (a step being recorded is issued first). */
    void record(jcuda.driver.CUevent e) {
        enter();
        graphs.abandon();
        flushStaged();
        JCudaDriver.cuEventRecord(e, stream);
    }

    /** Whether the device has reached {@code e} (false while the work before it is still queued or running). */
    boolean reached(jcuda.driver.CUevent e) {
        enter();
        try {
            return JCudaDriver.cuEventQuery(e) == jcuda.driver.CUresult.CUDA_SUCCESS;
        } catch (CudaException notReady) {
            return false;   // CUDA_ERROR_NOT_READY, thrown as exceptions are enabled
        }
    }

    /** Milliseconds of device time from {@code start} to {@code stop}, once the device has reached {@code stop}. */
    float elapsedMillis(jcuda.driver.CUevent start, jcuda.driver.CUevent stop) {
        enter();
        JCudaDriver.cuEventSynchronize(stop);
        float[] ms = new float[1];
        JCudaDriver.cuEventElapsedTime(ms, start, stop);
        return ms[0];
    }

    @Override
    public void close() {
        if (closed) {
            return;
        }
        enter();
        sync();
        closed = true;
        graphs.close();
        memory.close();
        cuMemFreeHost(stagingHost);
        for (CUmodule m : modules) {
            cuModuleUnload(m);
        }
        for (jcuda.driver.CUevent e : events) {
            JCudaDriver.cuEventDestroy(e);
        }
        cuStreamDestroy(stream);
        cuDevicePrimaryCtxRelease(device);
    }
}
