package dev.hyspec.web;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.fail;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.net.URL;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import org.openqa.selenium.By;
import org.openqa.selenium.OutputType;
import org.openqa.selenium.TimeoutException;
import org.openqa.selenium.WebElement;
import org.openqa.selenium.chrome.ChromeDriver;
import org.openqa.selenium.support.ui.Select;
import org.openqa.selenium.support.ui.WebDriverWait;

/** hyspec's page at {@code /} in the browser, through the element ids the page keeps stable. */
final class WebPage {
    static final Duration GENERATION_TIMEOUT = Duration.ofSeconds(60);

    private final ChromeDriver driver;
    private final URL url;

    WebPage(ChromeDriver driver, URL url) {
        this.driver = driver;
        this.url = url;
    }

    /** Loads the page and waits until it has listed the model. */
    void open() {
        driver.get(url.toString());
        awaitState("idle");
    }

    void fill(String prompt, int maxTokens) {
        element("prompt").clear();
        element("prompt").sendKeys(prompt);
        element("max-tokens").clear();
        element("max-tokens").sendKeys(Integer.toString(maxTokens));
    }

    void select(String id, String value) {
        new Select(element(id)).selectByValue(value);
    }

    void click(String id) {
        element(id).click();
    }

    WebElement element(String id) {
        return driver.findElement(By.id(id));
    }

    /** An element's exact text ({@link WebElement#getText()} trims and normalises whitespace). */
    String text(String id) {
        return (String) script("return document.getElementById(arguments[0]).textContent;", id);
    }

    String output() {
        return text("output");
    }

    Object script(String javascript, Object... args) {
        return driver.executeScript(javascript, args);
    }

    /** Waits for the page to settle (neither loading nor streaming) and checks it settled in {@code state}. */
    void awaitState(String state) {
        try {
            new WebDriverWait(driver, GENERATION_TIMEOUT, Duration.ofMillis(50)).until(d -> {
                String now = element("status").getDomAttribute("data-state");
                return !now.equals("loading") && !now.equals("streaming");
            });
        } catch (TimeoutException e) {
            fail("the page is still '" + text("status") + "' after " + GENERATION_TIMEOUT + " (waiting for '"
                    + state + "')", e);
        }
        assertEquals(state, text("status"), "the page's status (error shown: '" + text("error") + "')");
    }

    /** Saves a screenshot as {@code target/name} for people to look at. */
    void screenshot(String name) {
        try {
            Path out = Path.of("target", name);
            Files.createDirectories(out.getParent());
            Files.write(out, driver.getScreenshotAs(OutputType.BYTES));
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
    }

    /**
     * Replaces the page's {@code fetch} of {@code /v1/completions} with {@code stream} delivered one
     * byte per read (events and UTF-8 characters split across reads); keeps the request body in
     * {@code window.lastCompletionRequest}.
     */
    void stubCompletions(String stream) {
        script("""
                const stream = arguments[0];
                const realFetch = window.fetch;
                window.fetch = (url, init) => {
                  if (!String(url).endsWith('/v1/completions')) {
                    return realFetch(url, init);
                  }
                  window.lastCompletionRequest = JSON.parse(init.body);
                  const bytes = new TextEncoder().encode(stream);
                  let next = 0;
                  const body = new ReadableStream({
                    pull(controller) {
                      if (next < bytes.length) {
                        controller.enqueue(bytes.slice(next, ++next));
                      } else {
                        controller.close();
                      }
                    },
                  });
                  return Promise.resolve(new Response(body, {headers: {'Content-Type': 'text/event-stream'}}));
                };""", stream);
    }

    /** Adds {@code field: value} to the body of the page's next {@code /v1/completions} requests (still sent). */
    void addToCompletionRequests(String field, Object value) {
        script("""
                const [field, value] = arguments;
                const realFetch = window.fetch;
                window.fetch = (url, init) => {
                  if (String(url).endsWith('/v1/completions')) {
                    init = {...init, body: JSON.stringify({...JSON.parse(init.body), [field]: value})};
                  }
                  return realFetch(url, init);
                };""", field, value);
    }
}
