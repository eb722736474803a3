package dev.hyspec.web;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Comparator;
import java.util.List;
import java.util.logging.Level;
import java.util.logging.Logger;
import java.util.stream.Stream;
import org.openqa.selenium.chrome.ChromeDriver;
import org.openqa.selenium.chrome.ChromeDriverService;
import org.openqa.selenium.chrome.ChromeOptions;

/**
 * Debian's headless chromium driven through Debian's chromedriver. Both paths are given explicitly,
 * so Selenium Manager never looks for (or downloads) a browser or driver; the profile is a fresh
 * temporary folder, removed on {@link #close()}.
 */
final class HeadlessChromium implements AutoCloseable {
    static final Path CHROMIUM = Path.of("/usr/bin/chromium");
    static final Path CHROMEDRIVER = Path.of("/usr/bin/chromedriver");

    /** Selenium warns when it has no DevTools bindings for this chromium; the tests use WebDriver only. */
    private static final Logger CDP_LOG = Logger.getLogger("org.openqa.selenium.devtools.CdpVersionFinder");

    private final Path profile;
    private final ChromeDriver driver;

    private HeadlessChromium(Path profile, ChromeDriver driver) {
        this.profile = profile;
        this.driver = driver;
    }

    /** Starts the browser; fails, naming the script that installs them, when chromium or chromedriver is missing. */
    static HeadlessChromium start() {
        for (Path binary : List.of(CHROMIUM, CHROMEDRIVER)) {
            if (!Files.isExecutable(binary)) {
                throw new IllegalStateException(binary + " is missing: the web page's browser test needs Debian's "
                        + "chromium and chromium-driver packages; run scripts/install-test-deps.sh (as root or with sudo)");
            }
        }
        CDP_LOG.setLevel(Level.SEVERE);
        Path profile;
        try {
            profile = Files.createTempDirectory("hyspec-chromium-");
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
        ChromeOptions options = new ChromeOptions();
        options.setBinary(CHROMIUM.toFile());
        options.addArguments("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                "--disable-quic", "--no-first-run", "--disable-background-networking", "--disable-component-update",
                "--disable-sync", "--window-size=1200,1000", "--user-data-dir=" + profile);
        ChromeDriverService service = new ChromeDriverService.Builder()
                .usingDriverExecutable(CHROMEDRIVER.toFile())
                .usingAnyFreePort()
                .build();
        try {
            return new HeadlessChromium(profile, new ChromeDriver(service, options));
        } catch (RuntimeException e) {
            delete(profile);
            throw e;
        }
    }

    ChromeDriver driver() {
        return driver;
    }

    @Override
    public void close() {
        try {
            driver.quit();
        } finally {
            delete(profile);
        }
    }

    private static void delete(Path dir) {
        try (Stream<Path> files = Files.walk(dir)) {
            files.sorted(Comparator.reverseOrder()).forEach(p -> p.toFile().delete());
        } catch (IOException e) {
            // a leftover temporary profile is harmless
        }
    }
}
