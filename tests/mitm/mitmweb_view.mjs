// Drives mitmweb in headless Chromium for tests/mitm/test_mitmweb_browser.py (issue 35, item 2).
// node mitmweb_view.mjs <playwright-core dir> <chromium> <mitmweb url with token> <path substring> <screenshot>
// Selects the first flow whose path contains <path substring>, opens its Response tab, waits until the
// Dragoman view has rendered, saves a screenshot and prints {"text": <the content view's text>} as JSON.
import { createRequire } from "node:module";

const [pwDir, chromium, url, pathPart, shot] = process.argv.slice(2);
const require = createRequire(import.meta.url);
const { chromium: driver } = require(pwDir);

const browser = await driver.launch({
  executablePath: chromium,
  args: ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync"],
});
try {
  const page = await browser.newPage({ viewport: { width: 1400, height: 1000 } });
  page.setDefaultTimeout(15000);
  await page.goto(url);
  const row = page.locator(".flow-table tbody tr", { hasText: pathPart }).first();
  await row.click();
  await page.locator(".flow-detail nav a, .flow-detail .nav-tabs a", { hasText: /^Response$/ }).first().click();
  const view = page.locator(".flow-detail", { hasText: "answer assembled from the upstream" });
  await view.waitFor();
  await view.getByText("lossiness report").first().waitFor();
  await page.screenshot({ path: shot, fullPage: false });
  console.log(JSON.stringify({ text: await view.innerText() }));
} finally {
  await browser.close();
}
